/work/main/user/target/x86_64-unknown-none/release/deps/exhaust-f21650c3c905b6ba.d: programs/src/bin/exhaust.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libexhaust-f21650c3c905b6ba.rmeta: programs/src/bin/exhaust.rs Cargo.toml

programs/src/bin/exhaust.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
