//! The wait queues against a model: a list of (key, thread, deadline) in arrival order.
//! Random parks, wakes, expiries and removals never lose or duplicate a thread, wake in
//! arrival order per word, and expire exactly the threads whose deadline has passed.

use proptest::prelude::*;
use sched::WaitQueues;

#[derive(Clone, Debug)]
enum Op {
    Park(u64, Option<u64>),
    Wake(u64, usize),
    Expire(u64),
    Remove(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3u64, prop::option::of(0..50u64)).prop_map(|(k, d)| Op::Park(k, d)),
        2 => (0..3u64, 0..4usize).prop_map(|(k, n)| Op::Wake(k, n)),
        1 => (0..60u64).prop_map(Op::Expire),
        1 => (0..40u32).prop_map(Op::Remove),
    ]
}

proptest! {
    #[test]
    fn queues_behave_as_the_model(ops in prop::collection::vec(op(), 0..120)) {
        let mut w = WaitQueues::new();
        let mut model: Vec<(u64, u32, Option<u64>)> = Vec::new();
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::Park(k, d) => {
                    w.park((1, k), next, d);
                    model.push((k, next, d));
                    next += 1;
                }
                Op::Wake(k, n) => {
                    let want: Vec<u32> =
                        model.iter().filter(|e| e.0 == k).take(n).map(|e| e.1).collect();
                    model.retain(|e| !want.contains(&e.1));
                    prop_assert_eq!(w.wake((1, k), n), want);
                }
                Op::Expire(now) => {
                    let mut want: Vec<u32> = model
                        .iter()
                        .filter(|e| e.2.is_some_and(|d| d <= now))
                        .map(|e| e.1)
                        .collect();
                    model.retain(|e| e.2.is_none_or(|d| d > now));
                    let mut got = w.expire(now);
                    got.sort_unstable();
                    want.sort_unstable();
                    prop_assert_eq!(got, want);
                }
                Op::Remove(t) => {
                    let present = model.iter().any(|e| e.1 == t);
                    model.retain(|e| e.1 != t);
                    prop_assert_eq!(w.remove(|&x| x == t), present.then_some(t));
                }
            }
            prop_assert_eq!(w.len(), model.len());
            prop_assert_eq!(w.next_deadline(), model.iter().filter_map(|e| e.2).min());
        }
    }
}
