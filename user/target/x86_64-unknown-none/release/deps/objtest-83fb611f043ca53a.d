/work/main/user/target/x86_64-unknown-none/release/deps/objtest-83fb611f043ca53a.d: programs/src/bin/objtest.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libobjtest-83fb611f043ca53a.rmeta: programs/src/bin/objtest.rs Cargo.toml

programs/src/bin/objtest.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
