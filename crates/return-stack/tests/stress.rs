//! Std stress test: several threads push distinct nodes while the owner keeps taking; every
//! node must arrive exactly once.
#![cfg(not(loom))]

use return_stack::{AtomicU64, Links, ReturnStack};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

const PUSHERS: u64 = 4;
const PER_PUSHER: u64 = 50_000;

/// One link word per node, standing in for the nodes' memory.
struct Arena(Vec<AtomicU64>);

impl Links for Arena {
    fn link(&self, node: u64) -> &AtomicU64 {
        &self.0[node as usize]
    }
}

#[test]
fn every_node_arrives_exactly_once() {
    let total = PUSHERS * PER_PUSHER;
    // Node ids are 1..=total; index 0 is unused because 0 means "empty".
    let arena = Arena((0..=total).map(|_| AtomicU64::new(0)).collect());
    let stack = ReturnStack::new();
    let done = AtomicBool::new(false);
    let mut seen = vec![false; total as usize + 1];
    let mut received = 0u64;

    thread::scope(|s| {
        let pushers: Vec<_> = (0..PUSHERS)
            .map(|p| {
                let (arena, stack) = (&arena, &stack);
                s.spawn(move || {
                    // Interleave the pushers' ids so neighbouring nodes race each other.
                    for i in 0..PER_PUSHER {
                        stack.push(1 + i * PUSHERS + p, arena);
                    }
                })
            })
            .collect();
        let done = &done;
        s.spawn(move || {
            // Set `done` even if a pusher panicked, so the owner stops and the test fails
            // instead of hanging.
            let mut ok = true;
            for p in pushers {
                ok &= p.join().is_ok();
            }
            done.store(true, Ordering::Release);
            assert!(ok, "a pusher panicked");
        });

        // The owner: drain until the pushers are finished and the stack is empty.
        loop {
            let finished = done.load(Ordering::Acquire);
            let mut taken = stack.take_all();
            while let Some(node) = taken.next(&arena) {
                assert!(node >= 1 && node <= total, "bogus node {node}");
                assert!(!seen[node as usize], "node {node} received twice");
                seen[node as usize] = true;
                received += 1;
            }
            if finished && stack.is_empty() {
                break;
            }
            thread::yield_now();
        }
    });

    assert_eq!(received, total);
    assert!(seen[1..].iter().all(|&s| s));
}
