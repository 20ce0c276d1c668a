//! Property test of per-core ids (Corey §4.2): counters of different cores, drawn from in
//! any interleaving, never issue the same id twice, never issue 0, and each id names the
//! core that issued it; object tables of different cores agree.

use objects::{IdAllocator, ObjectId, ObjectKind, ObjectTable};
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

    #[test]
    fn tables_of_different_cores_never_collide(
        ops in proptest::collection::vec((0..3u16, any::<bool>()), 0..300),
    ) {
        let mut tables: Vec<ObjectTable<()>> = (0..3).map(ObjectTable::new).collect();
        let mut live: Vec<ObjectId> = Vec::new();
        let mut seen = BTreeSet::new();
        for (core, insert) in ops {
            if insert || live.is_empty() {
                let id = tables[core as usize].insert(ObjectKind::Segment, ()).unwrap();
                prop_assert_eq!(id.core(), core);
                prop_assert!(seen.insert(id));
                live.push(id);
            } else {
                let id = live.swap_remove(0);
                let freed = tables[id.core() as usize].drop_ref(id).unwrap();
                prop_assert_eq!(freed, Some((ObjectKind::Segment, ())));
            }
        }
        let total: usize = tables.iter().map(|t| t.len()).sum();
        prop_assert_eq!(total, live.len());
    }
}
