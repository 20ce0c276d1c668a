/work/main/user/target/x86_64-unknown-none/release/deps/abi-ce4d140962fd6461.d: /work/main/crates/abi/src/lib.rs

/work/main/user/target/x86_64-unknown-none/release/deps/libabi-ce4d140962fd6461.rmeta: /work/main/crates/abi/src/lib.rs

/work/main/crates/abi/src/lib.rs:
