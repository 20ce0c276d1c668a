//! What an application gives Metis: the [`Job`] trait (map, reduce, an optional combiner,
//! the output order), its keys ([`Key`]), how map emits pairs ([`Emit`]) and how reduce
//! sees a key's grouped values ([`Groups`]).

use alloc::vec::Vec;
use core::cmp::Ordering;
use core::ops::Range;

/// An intermediate key: ordered (cells and the output are sorted) and hashed (its hash
/// picks its column of the intermediate table, Corey §6.1). The hash must be a function of
/// the key alone, the same on every run and system, so outputs compare across them.
pub trait Key: Ord + Send + Sync {
    /// The key's hash; any 64-bit value (the engine mixes it before use).
    fn hash(&self) -> u64;
}

macro_rules! int_key {
    ($($t:ty),*) => {$(
        impl Key for $t {
            fn hash(&self) -> u64 {
                *self as u64
            }
        }
    )*};
}
int_key!(u8, u16, u32, u64, usize);

/// A MapReduce application. The input belongs to the job (a borrowed slice, usually), and
/// is addressed in units (bytes, points, rows) `0 .. input_len()`.
pub trait Job: Sync {
    /// The intermediate and output key.
    type Key: Key;
    /// An intermediate value.
    type Value: Send + Sync;
    /// What [`Job::reduce`] makes of one key's values.
    type Out: Send + Sync;
    /// True if [`Job::combine`] folds a key's values into one during map (Metis's
    /// combiner: a cell then holds one value per key).
    const COMBINES: bool = false;

    /// The input's length in units.
    fn input_len(&self) -> usize;

    /// The first unit boundary at or after `at` (`at <= input_len()`): where a map task
    /// may start. Text moves past the word `at` falls in; the default allows any unit.
    fn split_at(&self, at: usize) -> usize {
        at
    }

    /// Maps the units in `range` (a whole number of records) and emits pairs into `out`.
    fn map(&self, range: Range<usize>, out: &mut impl Emit<Self::Key, Self::Value>);

    /// Folds `value` into `into` (only called when [`Job::COMBINES`]).
    fn combine(&self, into: &mut Self::Value, value: Self::Value) {
        let _ = (into, value);
    }

    /// Reduces one key's values (every row's group, [`Groups`]) to its output.
    fn reduce(&self, key: &Self::Key, values: Groups<'_, Self::Value>) -> Self::Out;

    /// The output order, before the key: `Equal` (the default) sorts by key alone; a job
    /// ordering by its outputs (word count: count descending) returns that, and ties fall
    /// back to the key, so the order is total and the output the same on every run.
    fn order(&self, a: &(Self::Key, Self::Out), b: &(Self::Key, Self::Out)) -> Ordering {
        let _ = (a, b);
        Ordering::Equal
    }
}

/// Where map puts its pairs (the engine's intermediate table, or the sampler's).
pub trait Emit<K, V> {
    /// Adds the pair `(key, value)`.
    fn emit(&mut self, key: K, value: V);
}

/// One key's values at reduce: one group per row of the intermediate table (per map
/// worker) that saw the key, in row order; inside a group, in the order that worker
/// emitted them (a worker takes tasks in increasing order, so a group follows the input).
/// Which worker ran which task varies from run to run: a job whose output must not depend
/// on it sorts or folds the values.
pub struct Groups<'a, V> {
    rows: &'a mut Vec<Vec<V>>,
}

impl<'a, V> Groups<'a, V> {
    /// The groups in `rows` (the engine's).
    pub(crate) fn new(rows: &'a mut Vec<Vec<V>>) -> Groups<'a, V> {
        Groups { rows }
    }

    /// The number of values, over all groups.
    pub fn len(&self) -> usize {
        self.rows.iter().map(Vec::len).sum()
    }

    /// True if there are no values (never, for a key map emitted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The groups, one per row that saw the key.
    pub fn rows(&self) -> &[Vec<V>] {
        self.rows
    }

    /// Every value, group after group.
    pub fn iter(&self) -> impl Iterator<Item = &V> {
        self.rows.iter().flatten()
    }

    /// Every value, moved out, group after group: the first group's buffer is reused and
    /// the others copied after it (Corey §8.5.1: reduce copies a word's indices "to a
    /// freshly allocated buffer").
    pub fn take_all(self) -> Vec<V> {
        let mut rows = self.rows.drain(..);
        let mut all = rows.next().unwrap_or_default();
        for mut more in rows {
            all.append(&mut more);
        }
        all
    }
}
