# The commands the README gives. Each one installs missing Debian packages, configures and
# builds first, so they work on a fresh Debian 12 machine; meson + ninja do the real work
# (plain meson usage is in README.md).
#
#   make test     build, run every test, end with `N passed, N failed`
#   make train    build, train fmnist_cnn on Fashion-MNIST with NPROC=2 local ranks (DDP)
#   make bench    build, run bench/ops_bench and bench/p2p_perf
#   make sanitize ASan+UBSan over every test, TSan over the threaded layers (scripts/sanitize.sh)
#   make fuzz     the libFuzzer targets of tests/fuzz, FUZZ_TIME seconds each (scripts/fuzz.sh)
#   make format   clang-format the tree;  make format-check  fail if it is not formatted
#   make install  the library (stripped), headers, ringlet.pc, the CMake package, the ringlet
#                 program and its recipes (package/README.md), under PREFIX (default
#                 /usr/local), in DESTDIR
#   make deb      Debian packages ringlet and libringlet-dev of the build, in BUILD/deb
#
# Variables: BUILD (build dir, default build), MESON_OPTS (e.g. -Dcuda=disabled; applied with
# `meson configure` when BUILD is already configured, since `meson setup` would ignore them),
# TEST_ARGS (extra `meson test` arguments, e.g. a test name), BENCH_ARGS.

BUILD ?= build
MESON_OPTS ?=
TEST_ARGS ?=
BENCH_ARGS ?=
MESON ?= meson
PYTHON ?= python3
CLANG_FORMAT ?= clang-format

.DEFAULT_GOAL := build
.PHONY: help deps build test sanitize fuzz train bench format format-check clean install deb

help:
	@sed -n '5,17p' Makefile | sed 's/^# \{0,1\}//'

# --- setup -----------------------------------------------------------------------------------

# A cheap presence check (no dpkg, no network): one file or program per required package.
# scripts/install-deps.sh runs only when one of them is missing, and installs only what is.
DEP_TOOLS := meson ninja pkg-config g++ ccache cmake $(PYTHON)
DEP_FILES := /usr/include/asio.hpp /usr/include/xtensor/xarray.hpp \
             /usr/include/xtensor-blas/xlinalg.hpp /usr/include/xtl/xtl_config.hpp \
             /usr/include/xsimd/xsimd.hpp /usr/include/nlohmann/json.hpp \
             /usr/include/doctest/doctest.h /usr/include/infiniband/verbs.h /usr/include/zlib.h \
             /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
missing_files = $(filter-out $(wildcard $(DEP_FILES)),$(DEP_FILES)) \
                $(if $(wildcard /usr/lib/*/pkgconfig/openblas.pc /usr/lib/pkgconfig/openblas.pc),,openblas.pc)

deps:
	@missing="$(strip $(missing_files))"; \
	for tool in $(DEP_TOOLS); do \
	  command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: not found:$$missing"; \
	  bash scripts/install-deps.sh; \
	fi

# Configures BUILD when it is not configured yet (or a previous setup stopped half-way);
# MESON_OPTS on an existing BUILD go through `meson configure`.
build: deps
	@set -e; \
	if [ ! -f $(BUILD)/build.ninja ]; then \
	  if [ -f $(BUILD)/meson-private/coredata.dat ]; then \
	    echo "+ $(strip $(MESON) setup --reconfigure $(BUILD) $(MESON_OPTS))"; \
	    $(MESON) setup --reconfigure $(BUILD) $(MESON_OPTS); \
	  else \
	    echo "+ $(strip $(MESON) setup $(BUILD) $(MESON_OPTS))"; \
	    $(MESON) setup $(BUILD) $(MESON_OPTS); \
	  fi; \
	elif [ -n "$(strip $(MESON_OPTS))" ]; then \
	  echo "+ $(strip $(MESON) configure $(BUILD) $(MESON_OPTS))"; \
	  $(MESON) configure $(BUILD) $(MESON_OPTS); \
	fi; \
	echo "+ $(MESON) compile -C $(BUILD)"; \
	$(MESON) compile -C $(BUILD)

# --- checks ----------------------------------------------------------------------------------

# The last line is always `N passed, N failed[, N skipped]` (scripts/test_summary.py), also
# when the build fails (then `0 passed, 1 failed`); the target fails unless every test passed.
# The old test log is removed first so that a failed build never reports a previous run.
test:
	@rm -f $(BUILD)/meson-logs/testlog.json
	@if ! $(MAKE) --no-print-directory build; then \
	  echo "make test: the build failed, so no test ran"; \
	  echo "0 passed, 1 failed"; \
	  exit 1; \
	fi
	@echo "+ $(strip $(MESON) test -C $(BUILD) --print-errorlogs $(TEST_ARGS))"; \
	$(MESON) test -C $(BUILD) --print-errorlogs $(TEST_ARGS) || true
	@echo "--- summary ($(BUILD)/meson-logs/testlog.json)"
	@$(PYTHON) scripts/test_summary.py $(BUILD)

# ASan + UBSan (clang, build-fuzz) over every test, TSan (build-tsan) over the threaded layers' tests;
# SANITIZE=asan or tsan runs one of them.
SANITIZE ?= all
sanitize: deps
	@bash scripts/sanitize.sh $(SANITIZE)

FUZZ_TIME ?= 20
fuzz: deps
	@bash scripts/fuzz.sh --time $(FUZZ_TIME)

format-check:
	@command -v $(CLANG_FORMAT) >/dev/null 2>&1 || \
	  { echo "format-check: $(CLANG_FORMAT) not found (apt-get install clang-format)"; exit 1; }
	@$(format_files) | xargs -r $(CLANG_FORMAT) --dry-run --Werror
	@echo "format-check: the tree is formatted"

format:
	@command -v $(CLANG_FORMAT) >/dev/null 2>&1 || \
	  { echo "format: $(CLANG_FORMAT) not found (apt-get install clang-format)"; exit 1; }
	@$(format_files) | xargs -r $(CLANG_FORMAT) -i

# Tracked C++/CUDA sources, plus new ones not yet added (ignored files excluded).
format_files = git ls-files --cached --others --exclude-standard -- '*.h' '*.cpp' '*.cu' | \
               while IFS= read -r f; do [ -f "$$f" ] && printf '%s\n' "$$f"; done | sort -u

# --- programs --------------------------------------------------------------------------------

# The main job: fmnist_cnn on Fashion-MNIST (the reference recipe, 3 epochs) with NPROC local
# ranks averaging gradients (DDP). TRAIN_ARGS adds overrides, e.g. TRAIN_ARGS='--epochs 1'.
NPROC ?= 2
TRAIN_ARGS ?=
train: build
	$(BUILD)/trainer/ringlet train --nproc $(NPROC) $(TRAIN_ARGS)

bench: build
	$(BUILD)/bench/ops_bench $(BENCH_ARGS)
	$(BUILD)/bench/p2p_perf

PREFIX ?=
DESTDIR ?=
install: build
	@if [ -n "$(PREFIX)" ]; then $(MESON) configure $(BUILD) -Dprefix=$(PREFIX); fi
	$(MESON) install -C $(BUILD) --strip $(if $(DESTDIR),--destdir $(DESTDIR))

deb: build
	bash scripts/make_deb.sh $(BUILD) $(BUILD)/deb

clean:
	rm -rf $(BUILD) $(BUILD)-nocuda $(BUILD)-cuda build-asan build-tsan build-fuzz
