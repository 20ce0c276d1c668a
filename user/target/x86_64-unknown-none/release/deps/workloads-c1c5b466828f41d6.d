/work/main/user/target/x86_64-unknown-none/release/deps/workloads-c1c5b466828f41d6.d: /work/main/workloads/src/lib.rs /work/main/workloads/src/memclone.rs /work/main/workloads/src/memory.rs /work/main/workloads/src/mempass.rs /work/main/workloads/src/nullsys.rs /work/main/workloads/src/pingpong.rs /work/main/workloads/src/result.rs /work/main/workloads/src/shm.rs

/work/main/user/target/x86_64-unknown-none/release/deps/libworkloads-c1c5b466828f41d6.rmeta: /work/main/workloads/src/lib.rs /work/main/workloads/src/memclone.rs /work/main/workloads/src/memory.rs /work/main/workloads/src/mempass.rs /work/main/workloads/src/nullsys.rs /work/main/workloads/src/pingpong.rs /work/main/workloads/src/result.rs /work/main/workloads/src/shm.rs

/work/main/workloads/src/lib.rs:
/work/main/workloads/src/memclone.rs:
/work/main/workloads/src/memory.rs:
/work/main/workloads/src/mempass.rs:
/work/main/workloads/src/nullsys.rs:
/work/main/workloads/src/pingpong.rs:
/work/main/workloads/src/result.rs:
/work/main/workloads/src/shm.rs:
