/work/main/user/target/x86_64-unknown-none/release/deps/sharedrange-f5532daefca68bb8.d: programs/src/bin/sharedrange.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libsharedrange-f5532daefca68bb8.rmeta: programs/src/bin/sharedrange.rs Cargo.toml

programs/src/bin/sharedrange.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
