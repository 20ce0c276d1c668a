//! Loom model: two pushers race the owner's `take_all`; every node is received exactly once.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p return-stack --release --test loom`.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use return_stack::{AtomicU64, Links, ReturnStack};

/// Nodes 1..=4 (index 0 unused: 0 means "empty").
const NODES: usize = 4;

struct Arena(Vec<AtomicU64>);

impl Links for Arena {
    fn link(&self, node: u64) -> &AtomicU64 {
        &self.0[node as usize]
    }
}

/// Walks a taken chain into `seen`, failing on a duplicate or a bogus node.
fn receive(stack: &ReturnStack, arena: &Arena, seen: &mut [bool; NODES + 1]) {
    let mut taken = stack.take_all();
    while let Some(node) = taken.next(arena) {
        assert!((1..=NODES as u64).contains(&node), "bogus node {node}");
        assert!(!seen[node as usize], "node {node} received twice");
        seen[node as usize] = true;
    }
}

/// Pusher `p` pushes `per_pusher` nodes (ids `1 + p`, `3 + p`); the owner takes twice while
/// they run and once after they are done.
fn pushers_race_owner(per_pusher: u64) {
    let arena = Arc::new(Arena((0..=NODES).map(|_| AtomicU64::new(0)).collect()));
    let stack = Arc::new(ReturnStack::new());
    let pushers: Vec<_> = (0..2u64)
        .map(|p| {
            let (arena, stack) = (arena.clone(), stack.clone());
            thread::spawn(move || {
                for i in 0..per_pusher {
                    stack.push(1 + p + 2 * i, &*arena);
                }
            })
        })
        .collect();

    let mut seen = [false; NODES + 1];
    receive(&stack, &arena, &mut seen);
    receive(&stack, &arena, &mut seen);
    for p in pushers {
        p.join().unwrap();
    }
    receive(&stack, &arena, &mut seen);

    assert!(stack.is_empty());
    let sent = 2 * per_pusher as usize;
    assert!(seen[1..=sent].iter().all(|&s| s), "lost a node: {seen:?}");
}

/// One node per pusher, every interleaving (no preemption bound).
#[test]
fn one_node_each_exhaustive() {
    loom::model(|| pushers_race_owner(1));
}

/// Two nodes per pusher, so pushes land on a non-empty stack and chains of several pushers'
/// nodes are walked; bounded to 4 preemptions to finish in seconds (unbounded takes minutes).
#[test]
fn two_nodes_each_bounded() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(4);
    model.check(|| pushers_race_owner(2));
}
