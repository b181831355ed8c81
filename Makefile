# Thin wrapper over Meson. `make demo` and `make check` install what they need first.
PREFIX ?= /usr/local
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECS ?= 60
PYTEST ?= /usr/bin/python3 -m pytest
# The e2e tests run in this many pytest-xdist workers: they mostly wait on daemons and
# jobs, so three at once take ~0.6x the time of one even on two cores.
E2E_WORKERS ?= 3
MESON_FLAGS ?= -Dwerror=true
KIT_DIR ?= $(BUILD)
VERSION := $(shell cat VERSION)

.PHONY: all deps build web check check-slurm check-asan fuzz fuzz-build fuzz-smoke stress demo bench bench-scale replay install clean \
	gpu-kit

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_FLAGS) --prefix=$(PREFIX)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

check: build
	scripts/check-format.sh
	meson test -C $(BUILD) --print-errorlogs --verbose
	GFLOW_BUILD_DIR=$(abspath $(BUILD)) $(PYTEST) -q -n $(E2E_WORKERS) tests/e2e
	$(MAKE) gpu-kit KIT_DIR=$(abspath $(BUILD))/kit-check
	$(MAKE) check-asan
	$(MAKE) fuzz-smoke

# The slurm backend against a real single-node Slurm cluster that tests/slurm starts in a
# temp dir (Debian's munge, slurmctld, slurmd), one per pytest worker; CI (.ci/run) runs it
# beside check. Needs root (Slurm's daemons run as root there). CHECK_BUILT=1: the tree is
# built already and another make is using it (.ci/run), so no ninja here.
check-slurm: $(if $(CHECK_BUILT),,build)
	@scripts/install-deps.sh --slurm
	GFLOW_BUILD_DIR=$(abspath $(BUILD)) $(PYTEST) -q -n $(E2E_WORKERS) tests/slurm

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) $(MESON_FLAGS) -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug

# The same unit and end-to-end tests against a build with AddressSanitizer and UBSan. The
# gpu suite (tests/gpu/check.sh on the simulator, ~2.5 min under ASan) runs in the plain
# build only: CI must stay under 20 minutes, and the e2e tests below already run gflowd
# under ASan on simulated GPUs.
check-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C $(ASAN_BUILD) --no-suite gpu --print-errorlogs --verbose
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		GFLOW_BUILD_DIR=$(abspath $(ASAN_BUILD)) $(PYTEST) -q -n $(E2E_WORKERS) tests/e2e

# The fuzz harnesses of tests/fuzz (libFuzzer; clang with ASan and UBSan).
$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) $(MESON_FLAGS) -Dfuzz=true -Db_lundef=false

fuzz-build: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) fuzz

# Each harness FUZZ_SECS seconds (make fuzz FUZZ_SECS=600); what it finds stays in
# $(FUZZ_BUILD)/fuzz/.
fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECS)

# Part of make check: every seed replayed, then 20000 mutations with a fixed seed.
fuzz-smoke: fuzz-build
	tests/fuzz/run.sh --smoke $(FUZZ_BUILD)

# Crash and fault injection against the real binaries (tests/stress); not part of check.
stress: build
	/usr/bin/python3 tests/stress/stress.py --build $(abspath $(BUILD))

# The offline kit that proves gflow on a machine's real GPUs (docs/gpu-kit.md), then
# checked where it is unpacked: relocatable, and its check.sh passes on the simulator.
gpu-kit: build
	scripts/make-gpu-kit.sh $(BUILD) $(KIT_DIR)
	tests/gpu/kit-test.sh $(KIT_DIR)/gflow-gpu-kit-$(VERSION).tar.gz $(BUILD) \
		tests/gpu/fixtures/1gpu.json

demo: build
	scripts/demo.sh $(BUILD)

# Side by side with task-spooler (installed here as a bench dependency), then gflow's own
# figures; the method is in docs/design.md (performance). BENCH="peers idle": only those
# sections (peers queue array sched ginfo freed-gpu idle gpu-poll).
bench: build
	@scripts/install-deps.sh --bench
	bench/run.sh $(BUILD) $(BENCH)

# gflow-replay (docs/replay.md): the Philly subset and the synthetic lab trace, each at two
# loads, every policy; CSV tables, wait-cdf.png (drawn with gnuplot, installed as a bench
# dependency) and default-vs-greedy.txt (printed last: the daemon's default against the
# old greedy pass) in $(BUILD)/replay.
replay: build
	@scripts/install-deps.sh --bench
	scripts/replay.sh $(BUILD) $(BUILD)/replay

# 1,000,000 finished + 100,000 queued jobs: recovery, RSS, listing, bulk ops (bench/scale.py).
bench-scale: build
	python3 bench/scale.py $(BUILD)

# The web dashboard's bundle (web/dist, committed, built into gflowd) from web/src, with
# esbuild from npm; only for someone changing the dashboard: the build itself needs no npm.
web:
	cd web && npm ci --no-audit --no-fund && npm run build

install: build
	meson configure $(BUILD) --prefix=$(PREFIX)
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
