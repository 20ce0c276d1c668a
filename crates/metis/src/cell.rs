//! One cell of the intermediate table: the keys one map worker emitted for one reduce
//! task, each with its grouped (or combined) values, kept sorted so reduce merges a column
//! without sorting it (Corey §6.1: "better algorithms for manipulating the intermediate
//! data"). Metis keeps a B+tree per cell; a sorted array does as well when cells are small,
//! which the reduce-task count (keys / 10 per column) arranges. Both are here; which one
//! a job uses is [`CellKind`], and `docs/metis.md` has the measurement behind the default.

use crate::job::{Job, Key, Values};
use alloc::collections::btree_map::{BTreeMap, Entry};
use alloc::vec::Vec;
use core::cmp::Ordering;

/// The structure of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKind {
    /// A vector of `(key, values)` sorted by key: binary search, insertion by shifting
    /// (only when a key is new). The default: the faster one measured (`docs/metis.md`).
    SortedArray,
    /// A B-tree (`alloc`'s `BTreeMap`, whose nodes hold 11 keys: the B+tree's role in
    /// Metis, without the leaf chain, which reduce does not need: it drains in order).
    BTree,
}

impl CellKind {
    /// Both kinds.
    pub const ALL: [CellKind; 2] = [CellKind::SortedArray, CellKind::BTree];

    /// Its name (`array`, `btree`).
    pub fn name(self) -> &'static str {
        match self {
            CellKind::SortedArray => "array",
            CellKind::BTree => "btree",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<CellKind> {
        CellKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A cell: keys with their values, sorted by key when drained.
pub trait Cell<K, V>: Default + Send {
    /// Adds `(key, value)`: folded into the key's value if `J` combines, appended to its
    /// group otherwise. True if the key is new to this cell.
    fn insert<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, value: V) -> bool;

    /// Adds a whole group of `key`'s values (moving the sample table's cells into the map
    /// table's), as [`Cell::insert`] would one by one.
    fn insert_group<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, values: Values<V>);

    /// The keys and their values, sorted by key.
    fn into_sorted(self) -> Vec<(K, Values<V>)>;
}

/// Where a sorted-array cell keeps its values: folded into one per key in a dense array
/// ([`Folded`], for jobs that combine: a count is 8 bytes, so a row's values mostly stay in
/// the first-level cache), or grouped ([`Grouped`]).
pub trait Store<V>: Default + Send {
    /// Adds `value` to entry `i`'s values.
    fn add<J: Job<Value = V>>(&mut self, i: usize, job: &J, value: V);
    /// Adds a group of values to entry `i`'s.
    fn add_all<J: Job<Value = V>>(&mut self, i: usize, job: &J, values: Values<V>);
    /// Makes room at `i` for a new entry's values (`values` not empty).
    fn insert<J: Job<Value = V>>(&mut self, i: usize, job: &J, values: Values<V>);
    /// The values, entry by entry.
    fn into_values(self) -> Vec<Values<V>>;
}

/// One value per key ([`Store`] for jobs that combine).
pub struct Folded<V>(Vec<V>);

impl<V> Default for Folded<V> {
    fn default() -> Self {
        Folded(Vec::new())
    }
}

impl<V: Send> Store<V> for Folded<V> {
    #[inline(always)]
    fn add<J: Job<Value = V>>(&mut self, i: usize, job: &J, value: V) {
        job.combine(&mut self.0[i], value);
    }

    fn add_all<J: Job<Value = V>>(&mut self, i: usize, job: &J, values: Values<V>) {
        for v in values.into_vec() {
            job.combine(&mut self.0[i], v);
        }
    }

    fn insert<J: Job<Value = V>>(&mut self, i: usize, job: &J, values: Values<V>) {
        let mut all = values.into_vec().into_iter();
        if let Some(mut first) = all.next() {
            for v in all {
                job.combine(&mut first, v);
            }
            self.0.insert(i, first);
        }
    }

    fn into_values(self) -> Vec<Values<V>> {
        self.0.into_iter().map(Values::One).collect()
    }
}

/// Every value per key ([`Store`] for jobs that group).
pub struct Grouped<V>(Vec<Values<V>>);

impl<V> Default for Grouped<V> {
    fn default() -> Self {
        Grouped(Vec::new())
    }
}

impl<V: Send> Store<V> for Grouped<V> {
    #[inline(always)]
    fn add<J: Job<Value = V>>(&mut self, i: usize, job: &J, value: V) {
        self.0[i].add(job, value);
    }

    fn add_all<J: Job<Value = V>>(&mut self, i: usize, job: &J, values: Values<V>) {
        self.0[i].add_all(job, values);
    }

    fn insert<J: Job<Value = V>>(&mut self, i: usize, _job: &J, values: Values<V>) {
        self.0.insert(i, values);
    }

    fn into_values(self) -> Vec<Values<V>> {
        self.0
    }
}

/// The sorted-array cell ([`CellKind::SortedArray`]): keys in order, each with a dense
/// tag (its [`Key::prefix`] and whether it is [`Key::whole`]) searched first, and its
/// values in a [`Store`].
pub struct ArrayCell<K, V, S> {
    /// `prefix << 1 | !whole` per key, in key order: a whole key sorts first among the
    /// keys of its prefix (it is a proper prefix of the others), so its tag is the
    /// smaller, and the tags are sorted too.
    tags: Vec<u64>,
    keys: Vec<K>,
    store: S,
    _values: core::marker::PhantomData<fn() -> V>,
}

impl<K, V, S: Default> Default for ArrayCell<K, V, S> {
    fn default() -> Self {
        ArrayCell {
            tags: Vec::new(),
            keys: Vec::new(),
            store: S::default(),
            _values: core::marker::PhantomData,
        }
    }
}

/// A key's tag: its prefix, then 0 if whole (so a whole key's tag is the smallest of its
/// prefix's).
#[inline]
fn tag<K: Key>(key: &K) -> u64 {
    (key.prefix() as u64) << 1 | !key.whole() as u64
}

impl<K: Key, V, S: Store<V>> ArrayCell<K, V, S> {
    /// Where `key` is (`Ok`) or would go (`Err`).
    #[inline]
    fn find(&self, key: &K) -> Result<usize, usize> {
        let whole = (key.prefix() as u64) << 1;
        // Binary search (branch-free in std): measured faster than a vectorised count
        // even for the 20–40 keys of a wrmem cell (docs/metis.md).
        let mut i = self.tags.partition_point(|&t| t < whole);
        if key.whole() {
            // Equal whole keys have equal tags, and no other key has this tag: decided
            // without reading a key.
            return if self.tags.get(i) == Some(&whole) { Ok(i) } else { Err(i) };
        }
        while i < self.tags.len() && self.tags[i] >> 1 == whole >> 1 {
            match self.keys[i].cmp(key) {
                Ordering::Less => i += 1,
                Ordering::Equal => return Ok(i),
                Ordering::Greater => break,
            }
        }
        Err(i)
    }

    fn put<J: Job<Value = V>>(&mut self, i: usize, job: &J, key: K, values: Values<V>) {
        self.tags.insert(i, tag(&key));
        self.keys.insert(i, key);
        self.store.insert(i, job, values);
    }
}

impl<K: Key, V: Send, S: Store<V>> Cell<K, V> for ArrayCell<K, V, S> {
    #[inline(always)]
    fn insert<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, value: V) -> bool {
        match self.find(&key) {
            Ok(i) => {
                self.store.add(i, job, value);
                false
            }
            Err(i) => {
                self.put(i, job, key, Values::One(value));
                true
            }
        }
    }

    fn insert_group<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, values: Values<V>) {
        match self.find(&key) {
            Ok(i) => self.store.add_all(i, job, values),
            Err(i) => self.put(i, job, key, values),
        }
    }

    fn into_sorted(self) -> Vec<(K, Values<V>)> {
        self.keys.into_iter().zip(self.store.into_values()).collect()
    }
}

/// The B-tree cell ([`CellKind::BTree`]).
pub struct TreeCell<K, V> {
    tree: BTreeMap<K, Values<V>>,
}

impl<K, V> Default for TreeCell<K, V> {
    fn default() -> Self {
        TreeCell { tree: BTreeMap::new() }
    }
}

impl<K: Key, V: Send> Cell<K, V> for TreeCell<K, V> {
    fn insert<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, value: V) -> bool {
        match self.tree.entry(key) {
            Entry::Occupied(mut e) => {
                e.get_mut().add(job, value);
                false
            }
            Entry::Vacant(e) => {
                e.insert(Values::One(value));
                true
            }
        }
    }

    fn insert_group<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, values: Values<V>) {
        match self.tree.entry(key) {
            Entry::Occupied(mut e) => e.get_mut().add_all(job, values),
            Entry::Vacant(e) => {
                e.insert(values);
            }
        }
    }

    fn into_sorted(self) -> Vec<(K, Values<V>)> {
        self.tree.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Emit, Groups};
    use crate::text::Word;
    use alloc::collections::BTreeMap;

    /// A counting job over any key type (only its combiner is used here).
    struct Count<K>(core::marker::PhantomData<K>);

    impl<K: Key> Job for Count<K> {
        type Key = K;
        type Value = u64;
        type Out = u64;
        const COMBINES: bool = true;
        fn input_len(&self) -> usize {
            0
        }
        fn map(&self, _: core::ops::Range<usize>, _: &mut impl Emit<K, u64>) {}
        fn combine(&self, into: &mut u64, value: u64) {
            *into += value;
        }
        fn reduce(&self, _: &K, values: Groups<'_, u64>) -> u64 {
            values.iter().sum()
        }
    }

    /// Inserts `keys` into every kind of cell; each drains sorted with the right counts.
    fn check<K: Key + Clone + core::fmt::Debug>(keys: &[K]) {
        let job = Count::<K>(core::marker::PhantomData);
        let mut want: BTreeMap<K, u64> = BTreeMap::new();
        let mut folded = ArrayCell::<K, u64, Folded<u64>>::default();
        let mut grouped = ArrayCell::<K, u64, Grouped<u64>>::default();
        let mut tree = TreeCell::<K, u64>::default();
        for k in keys {
            let new = !want.contains_key(k);
            *want.entry(k.clone()).or_default() += 1;
            assert_eq!(folded.insert(&job, k.clone(), 1), new, "{k:?}");
            assert_eq!(grouped.insert(&job, k.clone(), 1), new, "{k:?}");
            assert_eq!(tree.insert(&job, k.clone(), 1), new, "{k:?}");
        }
        let want: Vec<(K, u64)> = want.into_iter().collect();
        for got in [folded.into_sorted(), grouped.into_sorted(), tree.into_sorted()] {
            let got: Vec<(K, u64)> =
                got.into_iter().map(|(k, v)| (k, v.as_slice().iter().sum())).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn whole_and_longer_keys_sharing_a_prefix() {
        let raw: [&[u8]; 12] = [
            b"ABCD",
            b"ABCDE",
            b"ABC",
            b"ABCD",
            b"ABCDA",
            b"ABCE",
            b"ABCDE",
            b"AB",
            b"ABC\x01",
            b"ABCD\x01",
            b"ABC",
            b"ZZZZZZZZZZ",
        ];
        check(&raw.map(Word::new));
    }

    #[test]
    fn integer_keys_around_the_saturated_prefix() {
        let m = u32::MAX as u64;
        check(&[0u64, m, m + 1, m - 1, 5, m + 7, m, u64::MAX, m - 1, 0, m + 1]);
        check(&[3u32, u32::MAX, 3, u32::MAX - 1, u32::MAX, 0]);
    }
}
