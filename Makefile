# Atoll's front door. The work is done by `cargo xtask` (xtask/src); this file checks the
# toolchain, installs what is missing, and passes the settings below through the
# environment.
#
#   make run                    boot Atoll in QEMU on all host cores, serial console here
#   make run CORES=4 MEM=1G     choose the virtual machine
#   make run CORES=4 SOCKETS=2  ... with its cores in two packages
#   make run CMD="cores"        run one shell line, then power off
#   make run DISK=somedir       ... with an ext2 image of somedir as its disk
#   make test                   host unit tests, then QEMU integration tests
#   make bench                  every experiment on Atoll and on a Linux guest, with a report

SHELL := /bin/bash
.DEFAULT_GOAL := help

# rustup puts cargo in ~/.cargo/bin; find it even when the shell profile was not reloaded.
export PATH := $(HOME)/.cargo/bin:$(PATH)

# Settings read by `cargo xtask` (see `cargo xtask help`); empty means "default".
export CORES SOCKETS MEM ACCEL QEMU_ARGS CMD ASYM SCHED NUMA_POLICY KQUOTA CONSOLE NET DISK TEST_FILTER SKIP_HOST TEST_TIMEOUT QEMU REPEAT ONLY DRY_RUN

RUSTUP_INSTALL := curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh
# The host side (xtask, build scripts) links with the system C compiler.
LINKER_PACKAGES := gcc libc6-dev

.PHONY: help run test build deps toolchain fmt clippy clean bench-host bench bench-smoke

help:
	@echo "Atoll: a research operating system for many-core x86-64 machines."
	@echo
	@echo "  make run     build and boot Atoll in QEMU (Ctrl-A X quits)"
	@echo "  make test    host unit tests, then QEMU integration tests; ends with 'N passed, M failed'"
	@echo "  make build   build the kernel (target/x86_64-unknown-none/release/atoll-kernel)"
	@echo "  make deps    install what is missing (QEMU, e2fsprogs, wrk, the Rust target), or say how"
	@echo "  make bench   every experiment on Atoll and on a Linux guest in the same VM;"
	@echo "               writes target/bench/results.json, report.md and PNG plots"
	@echo "  make bench-smoke  one tiny experiment on both systems at 1 core (also in make test)"
	@echo "  make bench-host  URPC between two pinned host threads vs the cache-line floor and rtrb"
	@echo "  make fmt     format all code"
	@echo "  make clippy  lint all code, warnings are errors"
	@echo "  make clean   remove build output"
	@echo
	@echo "Settings (make VAR=value ..., or the environment):"
	@echo "  CORES=N        run: virtual CPUs (default: host CPUs)"
	@echo "  SOCKETS=S      run, test, bench: spread the cores over S packages (-smp N,sockets=S)"
	@echo "  MEM=SIZE       run: memory, e.g. 512M, 16G (default: 512M)"
	@echo "  CMD=\"...\"      run: one shell line, then power off"
	@echo "  ASYM=\"1:50\"    run: emulated slow cores, CORES:PERCENT (12.5 % steps; groups by spaces)"
	@echo "  SCHED=amps|symmetric  run: the scheduler (default amps)"
	@echo "  NUMA_POLICY=always|same-node|rss  run: when a running thread may change node (AMPS 3.3)"
	@echo "  KQUOTA=25|off  run: each program's kernel memory, percent of its core's (default 25)"
	@echo "  CONSOLE=kernel  run: the kernel's own console instead of the init shell"
	@echo "  NET=0          run: no virtio-net device (default: one, on QEMU user networking with restrict=on)"
	@echo "  DISK=DIR|FILE|none  run: the virtio-blk disk: an ext2 image of DIR (target/disks/, built again"
	@echo "                 only when DIR has newer files, so what Atoll writes is kept), a raw image FILE,"
	@echo "                 or none (default: target/disks/default.img, from the repository's disk/)"
	@echo "  ACCEL=tcg|kvm  accelerator (default: kvm only with a usable /dev/kvm and vmx/svm)"
	@echo "  QEMU_ARGS=\"...\" extra QEMU arguments, appended last"
	@echo "  TEST_FILTER=x  test: only QEMU runs whose label contains x; SKIP_HOST=1 skips host tests"
	@echo "  CORES=1,2,4    bench: VM core counts (default 1,2)"
	@echo "  REPEAT=N       bench: repetitions of every run (default 5)"
	@echo "  DRY_RUN=1      run, test, bench: check the settings and say what would run, booting nothing"
	@echo "  ONLY=a,b       bench: only these experiments (nullsys,urpc,shm_vs_msg,multicast,memclone,mempass,sharebench,fdbench,host,"
	@echo "                 thread_switch,thread_create,amps_jobs,amps_omp,amps_fairness,mcrt_*,shootdown,twophase,polling,unmap,lrpc,metis_wri,metis_wc,metis_phoenix,"
	@echo "                 tcp_conn,loopback,syscall_device,webd_filesum,file_read,file_write,filesum_disk,bcache_lookup)"

run: deps
	@cargo xtask run

test: deps
	@cargo xtask test

build: toolchain
	@cargo xtask build

deps: toolchain
	@cargo xtask deps

# Cargo (installed by rustup), the toolchain pinned in rust-toolchain.toml, and a C linker.
toolchain:
	@if ! command -v cargo >/dev/null; then \
	    echo "cargo not found. Install Rust with:"; \
	    echo "  $(RUSTUP_INSTALL)"; \
	    echo "then open a new shell (or run: . \"\$$HOME/.cargo/env\") and try again."; \
	    exit 1; \
	fi
	@cargo --version >/dev/null 2>&1 || rustup toolchain install
	@if ! command -v cc >/dev/null; then \
	    manual="sudo apt-get update && sudo apt-get install -y $(LINKER_PACKAGES)"; \
	    if ! command -v apt-get >/dev/null; then \
	        echo "no C compiler (cc) found: install one (on Debian: $$manual)"; exit 1; \
	    elif [ "$$(id -u)" = 0 ]; then sudo=""; \
	    elif sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	    else echo "no C compiler (cc) found; install one with:"; echo "  $$manual"; exit 1; \
	    fi; \
	    echo "make: no C compiler (cc) found, installing $(LINKER_PACKAGES) with apt-get"; \
	    $$sudo apt-get update || exit 1; \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y $(LINKER_PACKAGES) || exit 1; \
	    command -v cc >/dev/null || { echo "make: installed $(LINKER_PACKAGES), still no cc"; exit 1; }; \
	fi

fmt: toolchain
	cargo fmt --all

# Hosted URPC benchmark on CPUs 0 and 1 (bench-host/src/lib.rs): prints RESULT lines.
bench-host: toolchain
	cargo run --release -p bench-host

# Atoll against a Linux guest (xtask/src/bench, docs/bench.md). The first run fetches the
# guest's kernel and busybox with apt-get download into target/linux-guest/.
bench: deps
	@cargo xtask bench

bench-smoke: deps
	@cargo xtask bench-smoke

clippy: toolchain
	cargo clippy --workspace --exclude atoll-kernel --all-targets -- -D warnings
	cargo clippy -p atoll-kernel --target x86_64-unknown-none -- -D warnings
	cd user && cargo clippy --release --target x86_64-unknown-none -- -D warnings

clean:
	cargo clean
