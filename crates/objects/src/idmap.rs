//! The id → entry map of a share (Corey §3.3: "a share maps application-visible
//! identifiers to kernel data pointers"; §8.4 keeps a share in a hashtable). Every system
//! call that names an object looks it up here, and `dup`/`close` (`share_dupobj`,
//! `share_delobj`) are one insert and one removal, so the map is a hash table: open
//! addressing with linear probing, at most half full, and removal by backward shift (no
//! tombstones, so probes stay short however many inserts and removals a share sees).
//! Ids are never 0 ([`ObjectId::is_valid`]), but the table does not rely on it: an empty
//! slot is `None`.

use alloc::vec::Vec;
use core::mem;

use crate::id::ObjectId;

/// Fewest slots of a table that holds anything.
const MIN_SLOTS: usize = 8;

/// Why [`IdMap::insert_new`] gave the value back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The id is there already.
    Present,
    /// The table had to grow and its new slots could not be allocated.
    NoMemory,
}

/// A hash map from object ids to `V`.
pub struct IdMap<V> {
    /// A power of two slots (or none), each empty or an (id, value) pair.
    slots: Vec<Option<(ObjectId, V)>>,
    len: usize,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap::new()
    }
}

impl<V> IdMap<V> {
    /// An empty map (allocates nothing until the first insert).
    pub const fn new() -> Self {
        IdMap { slots: Vec::new(), len: 0 }
    }

    /// How many ids the map holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Kernel bytes its slots take now (what a quota is charged for the table).
    pub fn bytes(&self) -> u64 {
        Self::bytes_of(self.slots.len())
    }

    /// Kernel bytes its slots would take with one more id (the table doubles when it
    /// would be more than half full).
    pub fn bytes_with_one_more(&self) -> u64 {
        if (self.len + 1) * 2 > self.slots.len() {
            Self::bytes_of((self.slots.len() * 2).max(MIN_SLOTS))
        } else {
            self.bytes()
        }
    }

    fn bytes_of(slots: usize) -> u64 {
        (slots * mem::size_of::<Option<(ObjectId, V)>>()) as u64
    }

    /// The home slot of `id` in a table of `slots` slots (a power of two): Fibonacci
    /// hashing of the id with its core folded in, so ids of one core (consecutive serials)
    /// and of several cores spread evenly.
    fn home(id: ObjectId, slots: usize) -> usize {
        let folded = id.0 ^ (id.0 >> 40);
        (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - slots.trailing_zeros())) as usize
    }

    /// The slot holding `id`, if any.
    fn find(&self, id: ObjectId) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = Self::home(id, self.slots.len());
        loop {
            match &self.slots[i] {
                None => return None,
                Some((k, _)) if *k == id => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The value of `id`.
    pub fn get(&self, id: &ObjectId) -> Option<&V> {
        let i = self.find(*id)?;
        self.slots[i].as_ref().map(|(_, v)| v)
    }

    /// Whether `id` is in the map.
    pub fn contains_key(&self, id: &ObjectId) -> bool {
        self.find(*id).is_some()
    }

    /// Adds `id` → `value` if `id` is not there yet and, when the table must grow, its new
    /// slots can be allocated; otherwise gives `value` back, saying why. (Allocation is
    /// fallible: in the kernel a failed one would otherwise stop the core.)
    pub fn insert_new(&mut self, id: ObjectId, value: V) -> Result<(), (Refused, V)> {
        if self.find(id).is_some() {
            return Err((Refused::Present, value));
        }
        if (self.len + 1) * 2 > self.slots.len()
            && self.resize((self.slots.len() * 2).max(MIN_SLOTS)).is_err()
        {
            return Err((Refused::NoMemory, value));
        }
        self.place(id, value);
        self.len += 1;
        Ok(())
    }

    /// Puts a pair into the first free slot of its probe sequence (the id is not there).
    fn place(&mut self, id: ObjectId, value: V) {
        let mask = self.slots.len() - 1;
        let mut i = Self::home(id, self.slots.len());
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some((id, value));
    }

    /// Takes `id` out and returns its value.
    pub fn remove(&mut self, id: &ObjectId) -> Option<V> {
        let mut hole = self.find(*id)?;
        let (_, value) = self.slots[hole].take()?;
        self.len -= 1;
        // Backward shift: move each later pair of the run whose home is not between the
        // hole and it (cyclically) into the hole, so every pair stays reachable from its
        // home without crossing an empty slot.
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some((k, _)) = &self.slots[j] else { break };
            let home = Self::home(*k, self.slots.len());
            let between =
                if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !between {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
        if self.slots.len() > MIN_SLOTS && self.len * 8 < self.slots.len() {
            // Shrinking is only thrift: without the memory for the smaller table (a
            // removal must never fail), keep the bigger one.
            let _ = self.resize(self.slots.len() / 2);
        }
        Some(value)
    }

    /// Rehashes into `slots` slots (a power of two, more than twice `len`); leaves the
    /// table as it was if they cannot be allocated.
    fn resize(&mut self, slots: usize) -> Result<(), Refused> {
        let mut fresh = Vec::new();
        fresh.try_reserve_exact(slots).map_err(|_| Refused::NoMemory)?;
        fresh.resize_with(slots, || None);
        let old = mem::replace(&mut self.slots, fresh);
        for (id, value) in old.into_iter().flatten() {
            self.place(id, value);
        }
        Ok(())
    }

    /// The ids, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &ObjectId> + '_ {
        self.slots.iter().flatten().map(|(k, _)| k)
    }

    /// Every value, emptying the map.
    pub fn into_values(self) -> impl Iterator<Item = V> {
        self.slots.into_iter().flatten().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;
    use proptest::prelude::*;

    extern crate std;

    fn id(core: u64, serial: u64) -> ObjectId {
        ObjectId((core << crate::CORE_SHIFT) | serial)
    }

    #[test]
    fn grows_and_shrinks_and_keeps_everything() {
        let mut m = IdMap::new();
        for s in 1..=1000 {
            assert_eq!(m.insert_new(id(s % 3, s), s), Ok(()));
        }
        assert_eq!(m.insert_new(id(1, 1), 0), Err((Refused::Present, 0)));
        assert_eq!(m.len(), 1000);
        assert!(m.slots.len() >= 2000);
        for s in 1..=1000 {
            assert_eq!(m.get(&id(s % 3, s)), Some(&s));
        }
        for s in 1..=995 {
            assert_eq!(m.remove(&id(s % 3, s)), Some(s));
        }
        assert_eq!(m.remove(&id(1, 1)), None);
        assert!(m.slots.len() <= 64, "{} slots for 5 ids", m.slots.len());
        let mut left: Vec<u64> = m.into_values().collect();
        left.sort();
        assert_eq!(left, [996, 997, 998, 999, 1000]);
    }

    #[test]
    fn a_table_that_cannot_grow_is_left_as_it_was() {
        let mut m = IdMap::new();
        for s in 1..=10 {
            m.insert_new(id(0, s), s).unwrap();
        }
        let slots = m.slots.len();
        // More slots than any allocator gives: the resize fails, and nothing is lost.
        assert_eq!(m.resize(1 << 60), Err(Refused::NoMemory));
        assert_eq!((m.slots.len(), m.len()), (slots, 10));
        for s in 1..=10 {
            assert_eq!(m.get(&id(0, s)), Some(&s));
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u64),
        Remove(u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few cores and serials, so the same ids come back and probe runs collide.
        let key = (0..3u64, 1..40u64);
        prop_oneof![
            3 => key.clone().prop_map(|(c, s)| Op::Insert(c, s)),
            2 => key.prop_map(|(c, s)| Op::Remove(c, s)),
        ]
    }

    proptest! {
        /// Any sequence of inserts and removals: the map answers as a `BTreeMap` does, for
        /// every id present and absent, and stays at most half full.
        #[test]
        fn behaves_like_a_btree_map(ops in proptest::collection::vec(op(), 1..400)) {
            let mut m = IdMap::new();
            let mut model = BTreeMap::new();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Insert(c, s) => {
                        let fresh = !model.contains_key(&id(c, s));
                        prop_assert_eq!(m.insert_new(id(c, s), n).is_ok(), fresh);
                        model.entry(id(c, s)).or_insert(n);
                    }
                    Op::Remove(c, s) => {
                        prop_assert_eq!(m.remove(&id(c, s)), model.remove(&id(c, s)));
                    }
                }
                prop_assert_eq!(m.len(), model.len());
                prop_assert!(m.len() * 2 <= m.slots.len() || m.slots.is_empty());
                for c in 0..3 {
                    for s in 1..40 {
                        prop_assert_eq!(m.get(&id(c, s)), model.get(&id(c, s)));
                    }
                }
            }
            let mut keys: Vec<ObjectId> = m.keys().copied().collect();
            keys.sort();
            prop_assert_eq!(keys, model.keys().copied().collect::<Vec<_>>());
        }
    }
}
