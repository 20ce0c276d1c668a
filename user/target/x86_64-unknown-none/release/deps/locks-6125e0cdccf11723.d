/work/main/user/target/x86_64-unknown-none/release/deps/locks-6125e0cdccf11723.d: /work/main/crates/locks/src/lib.rs /work/main/crates/locks/src/cell.rs /work/main/crates/locks/src/mcs.rs /work/main/crates/locks/src/rwlock.rs /work/main/crates/locks/src/sync.rs /work/main/crates/locks/src/ticket.rs /work/main/crates/locks/src/tts.rs

/work/main/user/target/x86_64-unknown-none/release/deps/liblocks-6125e0cdccf11723.rmeta: /work/main/crates/locks/src/lib.rs /work/main/crates/locks/src/cell.rs /work/main/crates/locks/src/mcs.rs /work/main/crates/locks/src/rwlock.rs /work/main/crates/locks/src/sync.rs /work/main/crates/locks/src/ticket.rs /work/main/crates/locks/src/tts.rs

/work/main/crates/locks/src/lib.rs:
/work/main/crates/locks/src/cell.rs:
/work/main/crates/locks/src/mcs.rs:
/work/main/crates/locks/src/rwlock.rs:
/work/main/crates/locks/src/sync.rs:
/work/main/crates/locks/src/ticket.rs:
/work/main/crates/locks/src/tts.rs:
