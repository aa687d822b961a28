# grpolab build. `make` builds build/grpolab (CPU backend always; CUDA backend too when
# nvcc is found, on PATH or in /usr/local/cuda/bin). `make test` runs the cmocka suite,
# `make test-asan` the same under AddressSanitizer + UndefinedBehaviorSanitizer.
# Every entry point first runs scripts/deps.sh, which installs missing Debian packages.

.DEFAULT_GOAL := all
# a recipe that fails leaves no target behind (say a half-linked binary)
.DELETE_ON_ERROR:
SHELL := /bin/bash

BUILD ?= build
CC ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif
# gcc vectorises a loop at the CPU's preferred width, and a vectorised reduction's order, so
# its rounding, follows the width: -march=native on a Xeon that gcc 12 takes for
# icelake-client prefers 512-bit vectors where a Skylake-X or an AVX2 CPU takes 256, and a
# fig5 run's numbers differed. 256 on every x86-64 CPU keeps them alike (docs/kernels.md,
# "Determinism"); the kernels that want 512-bit vectors ask for them (cpu_ops.c).
VEC_OPT := $(if $(filter x86_64,$(shell uname -m)),-mprefer-vector-width=256)
OPT ?= -O3 -march=native $(VEC_OPT)
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -fno-math-errno -Wall -Wextra -Wno-unused-parameter -fopenmp -g
CFLAGS := $(CFLAGS_BASE) $(OPT) $(EXTRA_CFLAGS)

# OpenBLAS's OpenMP build, so BLAS and our OpenMP loops share one thread pool (the
# pthread build spins against OpenMP threads) and BLAS called inside a parallel region
# runs single-threaded. GSL's own CBLAS is replaced by OpenBLAS's.
OPENBLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-openmp
PKGS := hdf5 openblas gsl
PKG_CFLAGS = $(shell PKG_CONFIG_PATH=$(OPENBLAS_DIR)/pkgconfig pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(filter-out -lgslcblas,$(shell PKG_CONFIG_PATH=$(OPENBLAS_DIR)/pkgconfig pkg-config --libs $(PKGS) 2>/dev/null)) -Wl,-rpath,$(OPENBLAS_DIR)
LDLIBS = $(PKG_LIBS) -lm -fopenmp
TEST_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)

# ---- dependencies first: scripts/deps.sh runs before the probes below are believed. On a
# fresh machine it installs what is missing (OpenMPI's mpicc among it), after make has read
# this file with the machine as it was; the stamp it then writes is an included makefile,
# and make starts again when one of those was remade, so the probes see what deps.sh
# installed and the first `make test` builds and tests everything the machine can. The stamp
# is remade when deps.sh changes; `make deps` (every entry point) still runs it each time.
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),all)),)
include $(BUILD)/gen/deps.mk
endif
$(BUILD)/gen/deps.mk: scripts/deps.sh
	@mkdir -p $(dir $@)
	@scripts/deps.sh
	@echo "# scripts/deps.sh has run; make read this file again after it" > $@

# ---- probes: say what was found, degrade gracefully
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA ?= $(if $(NVCC),1,0)
MPICC := $(shell command -v mpicc 2>/dev/null)
NCCL_H := $(firstword $(wildcard /usr/include/nccl.h /usr/local/cuda/include/nccl.h))
# MPI=1 (the default where mpicc is found) builds `grpolab train` data parallel over MPI
# (src/sim/parallel/dist.c); MPI=0 builds the one-process communicator. The compiler stays CC: mpicc
# (OpenMPI's --showme) only gives the flags.
MPI ?= $(if $(MPICC),1,0)

SRC_C := $(sort $(wildcard src/kernels/*.c src/sim/*/*.c src/analysis/*.c)) src/common.c
MAIN_C := src/sim/cli/main.c
LIB_C := $(filter-out $(MAIN_C),$(SRC_C))
LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(LIB_C))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))

ifeq ($(CUDA),1)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCCFLAGS ?= -O3 -std=c++17 -lineinfo \
  -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
  -Xcompiler -fPIC,-Wall
CFLAGS += -DGRPOLAB_CUDA -I$(CUDA_HOME)/include
LIB_OBJ += $(BUILD)/src/kernels/cuda_ops.o
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
endif

ifeq ($(MPI),1)
CFLAGS += -DGRPOLAB_MPI $(shell $(MPICC) --showme:compile)
LDLIBS += $(shell $(MPICC) --showme:link)
# NCCL sums the gradients of a CUDA run where its header and library are there
NCCL_LIB := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libnccl.so $(CUDA_HOME)/lib64/libnccl.so))
ifeq ($(CUDA)$(if $(NCCL_H),1,0)$(if $(NCCL_LIB),1,0),111)
CFLAGS += -DGRPOLAB_NCCL -I$(dir $(NCCL_H))
LDLIBS += -L$(dir $(NCCL_LIB)) -Wl,-rpath,$(dir $(NCCL_LIB)) -lnccl
endif
endif

.PHONY: all deps probe test check-includes test-asan test-slurm bench bench-rl conformance blas-order clean gpu-check gpu-bundle reproduce-fig5 reproduce-fig6 reproduce-fig7 \
	reproduce-ablation docs-config

all: deps probe $(BUILD)/grpolab

deps:
	@scripts/deps.sh

probe:
	@echo "grpolab build: cc=$(CC) nvcc=$(if $(NVCC),$(NVCC),none) cuda-backend=$(if $(filter 1,$(CUDA)),yes,no) mpi=$(if $(filter 1,$(MPI)),$(MPICC),none) nccl=$(if $(filter -DGRPOLAB_NCCL,$(CFLAGS)),$(NCCL_H),none) build=$(BUILD)"

$(BUILD)/%.o: %.c $(wildcard src/*.h src/*/*.h src/*/*/*.h) $(BUILD)/gen/flags | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

# The compiler and flags the objects were built with: rewritten only when they change (say
# `make CUDA=0` after `make`), so that a build never links objects of two configurations.
BUILD_FLAGS := $(CC) $(CFLAGS) $(PKG_CFLAGS) | $(NVCC) $(NVCCFLAGS) | $(LDLIBS)
$(BUILD)/gen/flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD_FLAGS)' > $@.tmp; cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

# The commit the binary is built from (src/common.h grpolab_commit): rewritten only when it
# changes, so only common.o is rebuilt after a commit or an edit of a tracked file.
GIT_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(BUILD)/gen/git_commit.h: FORCE
	@mkdir -p $(dir $@)
	@echo '#define GRPOLAB_COMMIT "$(GIT_COMMIT)"' > $@.tmp; cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(BUILD)/src/common.o: $(BUILD)/gen/git_commit.h
$(BUILD)/src/common.o: CFLAGS += -I$(BUILD)/gen
FORCE:

$(BUILD)/src/kernels/cuda_ops.o: src/kernels/cuda_ops.cu $(wildcard src/kernels/*.h) $(BUILD)/gen/flags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libgrpolab.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Linked to a temporary file and renamed: a run that starts the binary while it is rebuilt
# (a sweep) gets the old one or the new one, never a half-written file.
$(BUILD)/grpolab: $(BUILD)/src/sim/cli/main.o $(BUILD)/libgrpolab.a
	$(CC) $(CFLAGS) -o $@.tmp $^ $(LDLIBS)
	mv -f $@.tmp $@

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(BUILD)/libgrpolab.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Isrc -o $@ $< $(TEST_SUPPORT) $(BUILD)/libgrpolab.a $(LDLIBS) $(TEST_LIBS)

# The library test_resume preloads into `grpolab train` to kill it at a chosen write
# (tests/preload/kill_at_write.c); never sanitized: it only counts and forwards writes.
$(BUILD)/tests/kill_at_write.so: tests/preload/kill_at_write.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -O2 -shared -fPIC -o $@ $< -ldl

# The include graph of src/ and the call graph of its objects against README's layers: no
# circle, no arrow up (scripts/check-includes.sh; tests/test_check_includes.c plants both).
check-includes: $(BUILD)/libgrpolab.a
	@scripts/check-includes.sh src $(BUILD)/src

# Runs every test binary; cmocka prints its summary per binary; fails if any failed.
test: deps probe $(BUILD)/grpolab $(TEST_BIN) $(BUILD)/tests/kill_at_write.so check-includes
	@fail=0; for t in $(TEST_BIN); do \
	  echo "== $$t"; \
	  GRPOLAB_BIN=$(BUILD)/grpolab GRPOLAB_KILL_LIB=$(BUILD)/tests/kill_at_write.so \
	  OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $$t || fail=1; \
	done; \
	if [ $$fail = 0 ]; then echo "make test: all test binaries passed ($(BUILD))"; \
	else echo "make test: FAILURES ($(BUILD))"; exit 1; fi

# docs/config.md's table of keys, written from the settings table (src/sim/io/settings.h) by
# `grpolab config --keys --markdown` between its marker lines; tests/test_config.c fails
# while the two differ.
docs-config: all
	@scripts/docs-block.sh docs/config.md 'grpolab config --keys --markdown' \
	  $(BUILD)/grpolab config --keys --markdown

# Sanitizer build in its own folder, CPU backend only (ASan does not mix with the CUDA runtime).
test-asan:
	@$(MAKE) --no-print-directory test BUILD=build-asan CUDA=0 \
	  OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"

# `grpolab sweep slurm --submit` against a real single-node Slurm started by the test as root
# (tests/slurm/test_sweep_slurm.sh; installs slurm-wlm and munge first; skips, saying why,
# where the daemons cannot start). Run by .ci/run.
test-slurm: all
	@scripts/deps.sh --slurm || echo "test-slurm: slurm-wlm and munge could not be installed (above)"
	@GRPOLAB_BIN=$(BUILD)/grpolab tests/slurm/test_sweep_slurm.sh

# Kernel/model benchmark; figures go into docs/benchmarks.md by hand, with this command.
bench: all
	$(BUILD)/grpolab bench $(BENCH_ARGS)
	@if [ -f data/models/base.h5 ]; then \
	  for o in grpo dr_grpo; do \
	    echo "== RL throughput, experiments/fig5/$$o.ini, 5 steps from data/models/base.h5"; \
	    $(BUILD)/grpolab train --config experiments/fig5/$$o.ini --set train.steps=5 \
	      --set train.eval_every=0 --set train.checkpoint_every=0 --overwrite --out $(BUILD)/bench-rl-$$o.h5 \
	      2>&1 | grep '^train: 5 steps'; \
	  done; \
	else echo "(no data/models/base.h5: run grpolab pretrain first for the RL throughput figures)"; fi

# A virtualenv of the newest PyPI releases of torch, TRL, transformers, verl and OpenRLHF, made
# on demand for `make conformance` and the peers of `make bench-rl` (never by `make test`).
# verl and OpenRLHF come without their dependencies (DeepSpeed, vLLM, flash-attn: GPU training
# stacks): scripts/conformance.py imports only their loss and advantage modules, which need the
# few packages of CONF_PIP_MODS.
CONF_VENV = $(BUILD)/venv-conformance
CONF_PIP = torch trl transformers accelerate datasets
CONF_PIP_NODEPS = verl openrlhf
CONF_PIP_MODS = omegaconf tensordict codetiming orjson ray
$(CONF_VENV)/.made:
	@echo "creating $(CONF_VENV) from PyPI: $(CONF_PIP), $(CONF_PIP_NODEPS) (without their dependencies), $(CONF_PIP_MODS)"
	@/usr/bin/python3 -m venv $(CONF_VENV) && $(CONF_VENV)/bin/pip install -q $(CONF_PIP) && \
	  $(CONF_VENV)/bin/pip install -q --no-deps $(CONF_PIP_NODEPS) && \
	  $(CONF_VENV)/bin/pip install -q $(CONF_PIP_MODS) && touch $@ || { rm -rf $(CONF_VENV); exit 1; }

# The objective presets' framework settings (docs/objectives.md) checked against the frameworks'
# own functions on the same batches; prints the table of docs/objectives.md "The map, run".
conformance: all
	@scripts/deps.sh --bench
	@$(MAKE) --no-print-directory $(CONF_VENV)/.made
	$(CONF_VENV)/bin/python scripts/conformance.py --bin $(BUILD)/grpolab $(CONFORMANCE_ARGS)

# The RL step of experiments/fig5/grpo.ini in grpolab and, alternating in the same run, its
# PyTorch peer and with PEER=trl TRL's GRPOTrainer, both on the newest torch, TRL and
# transformers from PyPI ($(CONF_VENV); PEER_PY=/usr/bin/python3 runs the PyTorch peer on
# Debian's python3-torch instead). Settings: scripts/bench-rl.sh.
bench-rl: all
	@scripts/deps.sh --bench $(if $(PEER_PY),--bench-torch)
	@if [ -z "$(PEER_PY)" ]; then $(MAKE) --no-print-directory $(CONF_VENV)/.made; fi
	BIN=$(BUILD)/grpolab OUT=$(BUILD)/bench-rl PEER=$(or $(PEER),torch) \
	  PEER_PY=$(or $(PEER_PY),$(CONF_VENV)/bin/python) scripts/bench-rl.sh

# Does this machine's OpenBLAS round as grpolab's numbers assume (docs/kernels.md,
# "Determinism")? The attention's own products (src/kernels/cpu_ops.c) against OpenBLAS's,
# and a row of a product against the same row in a product of more rows (the sampler's
# compaction and shared prefill), bit for bit (scripts/blas_order.c); exit 1 where not.
blas-order: deps probe $(BUILD)/libgrpolab.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Isrc -o $(BUILD)/blas_order scripts/blas_order.c $(BUILD)/libgrpolab.a $(LDLIBS)
	OMP_NUM_THREADS=1 $(BUILD)/blas_order

# Everything that needs a GPU (docs/benchmarks.md); run on a GPU machine.
gpu-check:
	@scripts/gpu-check.sh

# gpu-check's binaries built here and packed for a GPU machine without the Debian packages
# (scripts/gpu-bundle.sh says how to run them there).
gpu-bundle: deps
	@scripts/gpu-bundle.sh

# The map of where the bias shows (scripts/reproduce-sensitivity.sh): GRPO and Dr. GRPO along
# corpus.p_recover (a base model per value) and world.max_new_tokens, from the sweep files of
# experiments/sensitivity/, into plots/sensitivity/. AXIS=recover|budget|all, SEEDS (default
# 3 pairs per value; QUICK 2), QUICK=1 the smoke version that CI runs, BACKEND and JOBS as
# reproduce-fig5's (below).
.PHONY: reproduce-sensitivity
AXIS ?= all
reproduce-sensitivity: all
	@AXIS=$(AXIS) $(if $(filter command line environment,$(origin SEEDS)),SEEDS=$(SEEDS)) QUICK=$(QUICK) BACKEND=$(BACKEND) JOBS=$(JOBS) GRPOLAB=$(BUILD)/grpolab scripts/reproduce-sensitivity.sh

# Fig. 5 of the paper from a fresh clone (scripts/reproduce-fig5.sh): SEEDS=N seeds per
# objective (default 3), QUICK=1 the smoke version that CI runs, BACKEND=cpu|cuda|auto,
# JOBS=N runs trained at a time (default auto: 1 on a GPU, min(nproc, 2 x SEEDS) on the CPU),
# SET="key=value ..." with TAG=name an ablation
# of the RL settings into data/runs/NAME and plots/NAME.
SEEDS ?= 3
JOBS ?= auto
QUICK ?= 0
BACKEND ?= auto
SET ?=
TAG ?=
reproduce-fig5: all
	@SEEDS=$(SEEDS) QUICK=$(QUICK) BACKEND=$(BACKEND) JOBS=$(JOBS) SET="$(SET)" TAG="$(TAG)" GRPOLAB=$(BUILD)/grpolab scripts/reproduce-fig5.sh

# Fig. 6 of the paper, template x question-set coverage (scripts/reproduce-fig6.sh): Dr. GRPO
# under 3 templates x 4 question sets from the fig5 base model; SEEDS=N seeds (default 1 here,
# not reproduce-fig5's 3: one seed is 12 runs), QUICK=1 the smoke version that CI runs, and
# BACKEND, JOBS, SET with TAG as above.
reproduce-fig6: all
	@SEEDS=$(if $(filter command line environment,$(origin SEEDS)),$(SEEDS),1) QUICK=$(QUICK) BACKEND=$(BACKEND) JOBS=$(JOBS) SET="$(SET)" TAG="$(TAG)" GRPOLAB=$(BUILD)/grpolab scripts/reproduce-fig6.sh

# Fig. 7 of the paper (scripts/reproduce-fig7.sh): the pretraining chain general -> math ->
# math+QA, Dr. GRPO from each base and GRPO from the math base; SEEDS, QUICK, BACKEND and
# JOBS as above (JOBS auto: 1 on a GPU, min(nproc, 2) on the CPU).
reproduce-fig7: all
	@SEEDS=$(SEEDS) QUICK=$(QUICK) BACKEND=$(BACKEND) JOBS=$(JOBS) GRPOLAB=$(BUILD)/grpolab scripts/reproduce-fig7.sh

# The 2x2 of GRPO's two terms (scripts/reproduce-ablation.sh, experiments/ablation/terms_2x2.ini):
# the sweep, eval-run of every run, the summary (plots/ablation/summary.md) and fig5 of the
# four corners; QUICK=1 the smoke version that CI runs; JOBS and BACKEND as above.
reproduce-ablation: all
	@QUICK=$(QUICK) BACKEND=$(BACKEND) JOBS=$(JOBS) GRPOLAB=$(BUILD)/grpolab scripts/reproduce-ablation.sh

clean:
	rm -rf build build-asan
