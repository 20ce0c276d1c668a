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

/// The sorted-array cell ([`CellKind::SortedArray`]): the keys' prefixes
/// ([`Key::prefix`]) in one dense array, searched first, beside the entries.
pub struct ArrayCell<K, V> {
    /// Each key's [`Key::prefix`], in key order.
    prefixes: Vec<u32>,
    entries: Vec<(K, Values<V>)>,
}

impl<K, V> Default for ArrayCell<K, V> {
    fn default() -> Self {
        ArrayCell { prefixes: Vec::new(), entries: Vec::new() }
    }
}

impl<K: Key, V> ArrayCell<K, V> {
    /// Where `key` is (`Ok`) or would go (`Err`).
    #[inline]
    fn find(&self, key: &K) -> Result<usize, usize> {
        let p = key.prefix();
        // Binary search (branch-free in std): measured faster than a vectorised count
        // even for the 20–40 keys of a wrmem cell (docs/metis.md).
        let mut i = self.prefixes.partition_point(|&q| q < p);
        while i < self.prefixes.len() && self.prefixes[i] == p {
            match self.entries[i].0.cmp(key) {
                Ordering::Less => i += 1,
                Ordering::Equal => return Ok(i),
                Ordering::Greater => break,
            }
        }
        Err(i)
    }

    fn put(&mut self, i: usize, key: K, values: Values<V>) {
        self.prefixes.insert(i, key.prefix());
        self.entries.insert(i, (key, values));
    }
}

impl<K: Key, V: Send> Cell<K, V> for ArrayCell<K, V> {
    #[inline(always)]
    fn insert<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, value: V) -> bool {
        match self.find(&key) {
            Ok(i) => {
                self.entries[i].1.add(job, value);
                false
            }
            Err(i) => {
                self.put(i, key, Values::One(value));
                true
            }
        }
    }

    fn insert_group<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, values: Values<V>) {
        match self.find(&key) {
            Ok(i) => self.entries[i].1.add_all(job, values),
            Err(i) => self.put(i, key, values),
        }
    }

    fn into_sorted(self) -> Vec<(K, Values<V>)> {
        self.entries
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
