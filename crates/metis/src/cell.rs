//! One cell of the intermediate table: the keys one map worker emitted for one reduce
//! task, each with its grouped (or combined) values, kept sorted so reduce merges a column
//! without sorting it (Corey §6.1: "better algorithms for manipulating the intermediate
//! data"). Metis keeps a B+tree per cell; a sorted array does as well when cells are small,
//! which the reduce-task count (keys / 10 per column) arranges. Both are here; which one
//! a job uses is [`CellKind`], and `docs/metis.md` has the measurement behind the default.

use crate::job::Job;
use alloc::collections::btree_map::{BTreeMap, Entry};
use alloc::vec;
use alloc::vec::Vec;

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
    fn insert_group<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, values: Vec<V>);

    /// The keys and their values, sorted by key.
    fn into_sorted(self) -> Vec<(K, Vec<V>)>;
}

/// Adds `value` to a key's existing values.
fn add<J: Job>(job: &J, values: &mut Vec<J::Value>, value: J::Value) {
    match values.first_mut() {
        Some(first) if J::COMBINES => job.combine(first, value),
        _ => values.push(value),
    }
}

/// Adds `more` to a key's existing values.
fn add_all<J: Job>(job: &J, values: &mut Vec<J::Value>, more: Vec<J::Value>) {
    if J::COMBINES {
        for v in more {
            add(job, values, v);
        }
    } else {
        let mut more = more;
        values.append(&mut more);
    }
}

/// The sorted-array cell ([`CellKind::SortedArray`]).
pub struct ArrayCell<K, V> {
    entries: Vec<(K, Vec<V>)>,
}

impl<K, V> Default for ArrayCell<K, V> {
    fn default() -> Self {
        ArrayCell { entries: Vec::new() }
    }
}

impl<K: Ord + Send, V: Send> Cell<K, V> for ArrayCell<K, V> {
    fn insert<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, value: V) -> bool {
        match self.entries.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => {
                add(job, &mut self.entries[i].1, value);
                false
            }
            Err(i) => {
                self.entries.insert(i, (key, vec![value]));
                true
            }
        }
    }

    fn insert_group<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, values: Vec<V>) {
        match self.entries.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => add_all(job, &mut self.entries[i].1, values),
            Err(i) => self.entries.insert(i, (key, values)),
        }
    }

    fn into_sorted(self) -> Vec<(K, Vec<V>)> {
        self.entries
    }
}

/// The B-tree cell ([`CellKind::BTree`]).
pub struct TreeCell<K, V> {
    tree: BTreeMap<K, Vec<V>>,
}

impl<K, V> Default for TreeCell<K, V> {
    fn default() -> Self {
        TreeCell { tree: BTreeMap::new() }
    }
}

impl<K: Ord + Send, V: Send> Cell<K, V> for TreeCell<K, V> {
    fn insert<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, value: V) -> bool {
        match self.tree.entry(key) {
            Entry::Occupied(mut e) => {
                add(job, e.get_mut(), value);
                false
            }
            Entry::Vacant(e) => {
                e.insert(vec![value]);
                true
            }
        }
    }

    fn insert_group<J: Job<Key = K, Value = V>>(&mut self, job: &J, key: K, values: Vec<V>) {
        match self.tree.entry(key) {
            Entry::Occupied(mut e) => add_all(job, e.get_mut(), values),
            Entry::Vacant(e) => {
                e.insert(values);
            }
        }
    }

    fn into_sorted(self) -> Vec<(K, Vec<V>)> {
        self.tree.into_iter().collect()
    }
}
