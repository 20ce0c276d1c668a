//! Properties of AMPS's balancing over random machines: every move obeys §2.3.2's rule,
//! repeated pulling stops, and it stops balanced (`Lmax - Lmin <= 1`, §2.2) with no thread
//! lost; placement picks a core of least scaled load after the thread.

use proptest::prelude::*;
use sched::{LoadTable, Policy, Power, ScaledLoad};

/// A machine: each core's power (1 to 4, in thousandths) and run-queue length.
fn machine() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    (1usize..9).prop_flat_map(|n| {
        (prop::collection::vec(1000u64..=4000, n), prop::collection::vec(0u64..10, n))
    })
}

fn table(powers: &[u64], lengths: &[u64]) -> LoadTable {
    let powers: Vec<Power> = powers.iter().map(|&p| Power(p)).collect();
    let mut t = LoadTable::new(&powers, &[]);
    for (i, &n) in lengths.iter().enumerate() {
        t.set_length(i, n);
    }
    t
}

/// Lets every core pull in turn until none does; returns the moves made, or `None` if
/// it did not stop within `limit` moves.
fn settle(policy: Policy, t: &mut LoadTable, limit: usize) -> Option<usize> {
    let mut moves = 0;
    loop {
        let mut moved = false;
        for me in 0..t.len() {
            if let Some(m) = policy.pull_from(t, me) {
                let (s, d) = (*t.get(m.from).unwrap(), *t.get(m.to).unwrap());
                assert_eq!(m.to, me);
                assert_ne!(m.from, me);
                assert!(s.length > 0);
                if policy == Policy::Amps {
                    // §2.3.2: the puller's L after is not above the source's L before.
                    assert!(!d.load().plus_one().cmp_load(s.load()).is_gt());
                } else {
                    assert!(s.length >= 2 && !m.may_take_running);
                }
                t.set_length(m.from, s.length - 1);
                t.set_length(m.to, d.length + 1);
                moves += 1;
                moved = true;
                if moves > limit {
                    return None;
                }
            }
        }
        if !moved {
            return Some(moves);
        }
    }
}

proptest! {
    #[test]
    fn amps_balancing_stops_balanced((powers, lengths) in machine()) {
        let mut t = table(&powers, &lengths);
        let threads: u64 = lengths.iter().sum();
        let moves = settle(Policy::Amps, &mut t, 10_000);
        prop_assert!(moves.is_some(), "no end to the moves");
        prop_assert!(t.balanced(), "{:?}", t.cores());
        prop_assert_eq!(t.cores().iter().map(|c| c.length).sum::<u64>(), threads);
    }

    #[test]
    fn symmetric_balancing_evens_out_queue_lengths((powers, lengths) in machine()) {
        let mut t = table(&powers, &lengths);
        prop_assert!(settle(Policy::Symmetric, &mut t, 10_000).is_some());
        let max = t.cores().iter().map(|c| c.length).max().unwrap();
        let min = t.cores().iter().map(|c| c.length).min().unwrap();
        prop_assert!(max - min <= 1);
    }

    #[test]
    fn amps_places_on_a_core_of_least_load_after((powers, lengths) in machine()) {
        let t = table(&powers, &lengths);
        let chosen = Policy::Amps.place(&t, |_| true).unwrap();
        let after = |c: usize| t.get(c).unwrap().load().plus_one();
        for other in 0..t.len() {
            prop_assert!(!after(chosen).cmp_load(after(other)).is_gt());
        }
    }

    #[test]
    fn a_faster_idle_core_never_leaves_a_thread_on_a_slower_core_it_could_take(
        (powers, lengths) in machine()
    ) {
        // After settling, no core runs threads while a faster core would stay at or below
        // its load by taking one: faster-core-first has nothing left to do.
        let mut t = table(&powers, &lengths);
        settle(Policy::Amps, &mut t, 10_000).unwrap();
        for d in t.cores() {
            for s in t.cores().iter().filter(|s| s.length > 0 && s.power < d.power) {
                let after = ScaledLoad::new(d.length + 1, d.power);
                prop_assert!(after.cmp_load(s.load()).is_gt(), "{:?}", t.cores());
            }
        }
    }
}
