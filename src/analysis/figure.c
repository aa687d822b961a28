// figure.c: data files, gnuplot script and rendering of a figure (contract in figure.h).
#include "figure.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common.h"
#include "../sim/io/h5util.h"

int figure_parse_formats(const char *s, unsigned *mask, char *err, size_t errlen) {
    *mask = 0;
    const char *p = s;
    while (*p) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 3 && strncmp(p, "png", 3) == 0) *mask |= FMT_PNG;
        else if (len == 3 && strncmp(p, "pdf", 3) == 0) *mask |= FMT_PDF;
        else if (len == 3 && strncmp(p, "svg", 3) == 0) *mask |= FMT_SVG;
        else return set_err(err, errlen, "--format '%s': unknown format '%.*s' (allowed: png, pdf, svg, "
                            "comma-separated)", s, (int)len, p);
        p = q ? q + 1 : p + len;
    }
    if (!*mask) return set_err(err, errlen, "--format '%s': no format given (allowed: png, pdf, svg)", s);
    return 0;
}

int figure_begin(Figure *f, const char *base, unsigned formats, int width, int height, char *err,
                 size_t errlen) {
    if (!*base || strlen(base) >= sizeof f->base - 8)
        return set_err(err, errlen, "output path '%s': empty or too long", base);
    if (strpbrk(base, "\"\n\\'"))
        return set_err(err, errlen, "output path '%s': quotes, backslashes and newlines are not allowed "
                       "(the path goes into a gnuplot script)", base);
    if (check_parent_dir("cannot write figure", base, err, errlen) != 0) return -1;
    snprintf(f->base, sizeof f->base, "%s", base);
    snprintf(f->data_dir, sizeof f->data_dir, "%s_data", base);
    f->formats = formats;
    f->width = width;
    f->height = height;
    if (mkdir(f->data_dir, 0777) != 0 && errno != EEXIST)
        return set_err(err, errlen, "cannot create data directory '%s': %s", f->data_dir, strerror(errno));
    return 0;
}

FILE *figure_data(const Figure *f, const char *name, char *path, size_t pathlen, char *err,
                  size_t errlen) {
    snprintf(path, pathlen, "%s/%s", f->data_dir, name);
    FILE *fp = fopen(path, "w");
    if (!fp) set_err(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    return fp;
}

int figure_column_range(const char *path, int col, double *lo, double *hi) {
    FILE *fp = fopen(path, "r");
    if (!fp) return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#') continue;
        char *save = NULL, *tok = strtok_r(line, " \t\n", &save);
        for (int c = 1; tok && c < col; c++) tok = strtok_r(NULL, " \t\n", &save);
        if (tok) {
            char *end;
            double v = strtod(tok, &end);
            if (end != tok && isfinite(v)) {
                if (lo && v < *lo) *lo = v;
                if (hi && v > *hi) *hi = v;
                n++;
            }
        }
    }
    fclose(fp);
    return n;
}

int figure_column_has_data(const char *path, int col) {
    return figure_column_range(path, col, NULL, NULL) > 0;
}

void gp_escape(char *dst, size_t dstlen, const char *src) {
    size_t k = 0;
    for (; *src && k + 3 < dstlen; src++) {
        if (*src == '"' || *src == '\\' || *src == '\n') continue;
        if (strchr("_^{}@&~", *src)) dst[k++] = '\\', dst[k++] = '\\';  // literal in enhanced text
        dst[k++] = *src;
    }
    dst[k] = 0;
}

// Runs `gnuplot script`, collecting its stderr; -1 with its last lines if it fails.
static int run_gnuplot(const char *script, char *err, size_t errlen) {
    const char *gp = getenv("GNUPLOT");
    if (!gp || !*gp) gp = "gnuplot";
    int pipefd[2];
    if (pipe(pipefd) != 0) return set_err(err, errlen, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) return set_err(err, errlen, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(pipefd[1], 2);
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        close(pipefd[1]);
        execlp(gp, gp, script, (char *)NULL);
        fprintf(stderr, "cannot run '%s': %s", gp, strerror(errno));
        _exit(127);
    }
    close(pipefd[1]);
    size_t cap = 4096, len = 0;
    char *out = xmalloc(cap);
    ssize_t k;
    while ((k = read(pipefd[0], out + len, cap - len - 1)) > 0) {
        len += (size_t)k;
        if (cap - len < 512) out = realloc(out, cap *= 2);
        if (!out) die("out of memory reading gnuplot's output");
    }
    out[len] = 0;
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (code == 127)
        set_err(err, errlen, "%s (install gnuplot: scripts/deps.sh installs gnuplot-nox; or set "
                "GNUPLOT=/path/to/gnuplot); the data files and the script are written", out);
    else if (code != 0)
        set_err(err, errlen, "gnuplot failed on '%s' (exit %d): %.1500s", script, code,
                len > 1500 ? out + len - 1500 : out);
    else if (len)
        fprintf(stderr, "gnuplot (%s): %s%s", script, out, out[len - 1] == '\n' ? "" : "\n");
    free(out);
    return code == 0 ? 0 : -1;
}

int figure_render(const Figure *f, const char *body, char *err, size_t errlen) {
    static const struct {
        unsigned bit;
        const char *ext, *terminal;
    } T[] = {{FMT_PNG, "png", "pngcairo enhanced font 'Sans,10' size %d,%d"},
             {FMT_PDF, "pdf", "pdfcairo enhanced font 'Sans,7' size %.2fin,%.2fin"},
             {FMT_SVG, "svg", "svg enhanced font 'Sans,10' size %d,%d background '#ffffff'"}};
    char script[1100], term[256], out[1100];
    snprintf(script, sizeof script, "%s.gp", f->base);
    FILE *fp = fopen(script, "w");
    if (!fp) return set_err(err, errlen, "cannot write '%s': %s", script, strerror(errno));
    fprintf(fp, "# written by grpolab %s; the numbers are in %s/\n", GRPOLAB_VERSION, f->data_dir);
    for (int i = 0; i < 3; i++) {
        if (!(f->formats & T[i].bit)) continue;
        if (T[i].bit == FMT_PDF) snprintf(term, sizeof term, T[i].terminal, f->width / 100.0, f->height / 100.0);
        else snprintf(term, sizeof term, T[i].terminal, f->width, f->height);
        fprintf(fp, "\nreset\nset terminal %s\nset output \"%s.%s\"\n%s\nunset multiplot\nset output\n",
                term, f->base, T[i].ext, body);
    }
    if (fclose(fp) != 0) return set_err(err, errlen, "cannot write '%s': %s", script, strerror(errno));
    for (int i = 0; i < 3; i++) {  // no stale output passes the check below
        snprintf(out, sizeof out, "%s.%s", f->base, T[i].ext);
        if (f->formats & T[i].bit) unlink(out);
    }
    if (run_gnuplot(script, err, errlen) != 0) return -1;
    for (int i = 0; i < 3; i++) {
        if (!(f->formats & T[i].bit)) continue;
        snprintf(out, sizeof out, "%s.%s", f->base, T[i].ext);
        struct stat st;
        if (stat(out, &st) != 0 || st.st_size == 0)
            return set_err(err, errlen, "gnuplot ran on '%s' but wrote no %s", script, out);
    }
    return 0;
}
