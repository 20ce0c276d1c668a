//! Property test: sequential push/take sequences behave like a Vec used as a stack.
#![cfg(not(loom))]

use proptest::prelude::*;
use return_stack::{AtomicU64, Links, ReturnStack};

const NODES: usize = 64;

struct Arena(Vec<AtomicU64>);

impl Links for Arena {
    fn link(&self, node: u64) -> &AtomicU64 {
        &self.0[node as usize]
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Push the node with this index among the nodes not on the stack (mod their count).
    Push(usize),
    /// Take everything and walk the chain fully.
    TakeAll,
    /// Take everything but walk only this many nodes; the rest are pushed back.
    TakeSome(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<usize>().prop_map(Op::Push),
        1 => Just(Op::TakeAll),
        1 => (0usize..8).prop_map(Op::TakeSome),
    ]
}

proptest! {
    #[test]
    fn behaves_like_a_vec(ops in proptest::collection::vec(op(), 0..200)) {
        let arena = Arena((0..=NODES).map(|_| AtomicU64::new(0)).collect());
        let stack = ReturnStack::new();
        let mut model: Vec<u64> = Vec::new();
        // Nodes 1..=NODES not currently on the stack (the caller owns them).
        let mut spare: Vec<u64> = (1..=NODES as u64).collect();

        for op in ops {
            match op {
                Op::Push(i) => {
                    if spare.is_empty() {
                        continue;
                    }
                    let node = spare.swap_remove(i % spare.len());
                    stack.push(node, &arena);
                    model.push(node);
                }
                Op::TakeAll | Op::TakeSome(_) => {
                    let limit = match op {
                        Op::TakeSome(n) => n,
                        _ => usize::MAX,
                    };
                    let mut taken = stack.take_all();
                    prop_assert!(stack.is_empty());
                    let mut got = Vec::new();
                    while got.len() < limit {
                        match taken.next(&arena) {
                            Some(node) => got.push(node),
                            None => break,
                        }
                    }
                    // Newest first, exactly the model's stack order.
                    let want: Vec<u64> = model.iter().rev().take(got.len()).copied().collect();
                    prop_assert_eq!(&got, &want);
                    model.truncate(model.len() - got.len());
                    spare.extend(&got);
                    // Whatever was not walked goes back on, oldest first, as the model has it.
                    let mut rest = Vec::new();
                    while let Some(node) = taken.next(&arena) {
                        rest.push(node);
                    }
                    prop_assert_eq!(rest.len(), model.len());
                    for &node in rest.iter().rev() {
                        stack.push(node, &arena);
                    }
                }
            }
            prop_assert_eq!(stack.is_empty(), model.is_empty());
        }
    }
}
