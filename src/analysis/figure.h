// figure.h: a figure as gnuplot renders it at run time. A figure `-o plots/fig5` writes
//   plots/fig5_data/*.dat   the numbers plotted (whitespace-separated columns, '#' header,
//                           NaN for a missing value), what the tests check;
//   plots/fig5.gp           the gnuplot script (one block per output format; run it again
//                           from the same directory after editing it);
//   plots/fig5.{png,pdf,svg} the formats asked for (pngcairo, pdfcairo, svg terminals).
// gnuplot is $GNUPLOT if set, else `gnuplot` on PATH.
#ifndef GRPOLAB_ANALYSIS_FIGURE_H
#define GRPOLAB_ANALYSIS_FIGURE_H

#include <stddef.h>
#include <stdio.h>

enum { FMT_PNG = 1, FMT_PDF = 2, FMT_SVG = 4, FMT_ALL = 7 };

typedef struct {
    char base[1024];      // output path without extension
    char data_dir[1100];  // base + "_data"
    unsigned formats;     // FMT_* mask
    int width, height;    // pixels of the PNG (PDF and SVG in proportion)
} Figure;

// "png,pdf,svg" (any subset, any order) -> mask; -1 with a message naming the bad word.
int figure_parse_formats(const char *s, unsigned *mask, char *err, size_t errlen);

// Prepares the output: checks that base's directory exists and that base has no quote or
// newline (it goes into the script), creates the data directory.
int figure_begin(Figure *f, const char *base, unsigned formats, int width, int height, char *err,
                 size_t errlen);

// Opens data file `name` in the data directory for writing; path receives its path (as the
// script names it). NULL with a message on error.
FILE *figure_data(const Figure *f, const char *name, char *path, size_t pathlen, char *err,
                  size_t errlen);

// Writes base.gp (for each format: terminal, output, then body) and runs gnuplot on it;
// checks that every output file exists and is not empty. gnuplot's own messages are passed on.
int figure_render(const Figure *f, const char *body, char *err, size_t errlen);

// 1 if column col (1-based) of the data file at path holds at least one finite number.
int figure_column_has_data(const char *path, int col);

// The number of finite numbers in column col (1-based) of the data file at path (0 if it
// cannot be read). *lo is lowered to their minimum and *hi raised to their maximum (either
// may be NULL; start them at INFINITY and -INFINITY, and pass them on to cover several files).
int figure_column_range(const char *path, int col, double *lo, double *hi);

// Text safe inside a gnuplot double-quoted string in enhanced mode: drops '"', '\' and
// newlines, and makes _ ^ { } @ & ~ literal ("\\_").
void gp_escape(char *dst, size_t dstlen, const char *src);

#endif
