/work/main/user/target/x86_64-unknown-none/release/deps/libatoll-92d2e9fa8cb916a2.d: libatoll/src/lib.rs libatoll/src/args.rs libatoll/src/bench.rs libatoll/src/cfork.rs libatoll/src/console.rs libatoll/src/cores.rs libatoll/src/fd.rs libatoll/src/heap.rs libatoll/src/obj.rs libatoll/src/platform.rs libatoll/src/private.rs libatoll/src/shared.rs libatoll/src/sys.rs libatoll/src/threads.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/liblibatoll-92d2e9fa8cb916a2.rmeta: libatoll/src/lib.rs libatoll/src/args.rs libatoll/src/bench.rs libatoll/src/cfork.rs libatoll/src/console.rs libatoll/src/cores.rs libatoll/src/fd.rs libatoll/src/heap.rs libatoll/src/obj.rs libatoll/src/platform.rs libatoll/src/private.rs libatoll/src/shared.rs libatoll/src/sys.rs libatoll/src/threads.rs Cargo.toml

libatoll/src/lib.rs:
libatoll/src/args.rs:
libatoll/src/bench.rs:
libatoll/src/cfork.rs:
libatoll/src/console.rs:
libatoll/src/cores.rs:
libatoll/src/fd.rs:
libatoll/src/heap.rs:
libatoll/src/obj.rs:
libatoll/src/platform.rs:
libatoll/src/private.rs:
libatoll/src/shared.rs:
libatoll/src/sys.rs:
libatoll/src/threads.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
