/work/main/user/target/x86_64-unknown-none/release/deps/sysfuzz-a44e1221b5c94ac2.d: programs/src/bin/sysfuzz.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libsysfuzz-a44e1221b5c94ac2.rmeta: programs/src/bin/sysfuzz.rs Cargo.toml

programs/src/bin/sysfuzz.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
