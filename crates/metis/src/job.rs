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

    /// An order-preserving abbreviation of the key: `a < b` implies
    /// `a.prefix() <= b.prefix()`. Sorted-array cells binary-search a dense array of these
    /// first and compare whole keys only among equal prefixes (an "abbreviated key"). The
    /// default, 0, abbreviates nothing (every search then compares whole keys).
    fn prefix(&self) -> u32 {
        0
    }

    /// True if the prefix alone identifies this key: two keys that are both whole are
    /// equal exactly when their prefixes are. A whole key must also be smaller than every
    /// other key with its prefix (a cell finds it first). The default: never.
    fn whole(&self) -> bool {
        false
    }
}

macro_rules! int_key {
    ($($t:ty),*) => {$(
        impl Key for $t {
            fn hash(&self) -> u64 {
                *self as u64
            }

            /// The value itself, saturated at `u32::MAX` (monotone; larger keys fall back
            /// to whole comparisons).
            fn prefix(&self) -> u32 {
                u32::try_from(*self).unwrap_or(u32::MAX)
            }

            /// Below `u32::MAX`, the prefix is the value (the largest of the prefix's keys
            /// are the saturated ones, and the one whole key, `u32::MAX - 1` or less, is
            /// smaller than them).
            fn whole(&self) -> bool {
                u32::try_from(*self).is_ok_and(|v| v < u32::MAX)
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

/// One row's values for one key: a single value (always, for a job that combines; and a
/// key seen once) kept inline in the cell, or several. Inline, a combining job's cell
/// entry is one cache line with no pointer to chase on every emitted pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Values<V> {
    /// One value.
    One(V),
    /// More than one, in emission order.
    Many(Vec<V>),
}

impl<V> Values<V> {
    /// The values as a slice.
    pub fn as_slice(&self) -> &[V] {
        match self {
            Values::One(v) => core::slice::from_ref(v),
            Values::Many(vs) => vs,
        }
    }

    /// The values as a vector.
    pub fn into_vec(self) -> Vec<V> {
        match self {
            Values::One(v) => alloc::vec![v],
            Values::Many(vs) => vs,
        }
    }

    /// Adds `value`: folded into the one value if `J` combines, appended otherwise.
    #[inline]
    pub(crate) fn add<J: Job<Value = V>>(&mut self, job: &J, value: V) {
        match self {
            Values::One(v) if J::COMBINES => job.combine(v, value),
            Values::Many(vs) => vs.push(value),
            Values::One(_) => {
                if let Values::One(first) = core::mem::replace(self, Values::Many(Vec::new())) {
                    *self = Values::Many(alloc::vec![first, value]);
                }
            }
        }
    }

    /// Adds all of `more`, as [`Values::add`] would one by one.
    pub(crate) fn add_all<J: Job<Value = V>>(&mut self, job: &J, more: Values<V>) {
        match (self, more) {
            (Values::Many(vs), Values::Many(mut more)) if !J::COMBINES => vs.append(&mut more),
            (this, more) => {
                for v in more.into_vec() {
                    this.add(job, v);
                }
            }
        }
    }
}

/// One key's values at reduce: one group per row of the intermediate table (per map
/// worker) that saw the key, in row order. Inside a group the values are in task order
/// (a worker takes tasks in increasing order; the sampled tasks come first), and in
/// emission order within a task: so values that increase along the input (`wri`'s
/// positions) are sorted in each group, and [`Groups::merge_sorted`] merges them. Which
/// worker ran which task varies from run to run: a job whose output must not depend on
/// it merges, sorts or folds the values.
pub struct Groups<'a, V> {
    rows: &'a mut Vec<Values<V>>,
}

impl<'a, V> Groups<'a, V> {
    /// The groups in `rows` (the engine's).
    pub(crate) fn new(rows: &'a mut Vec<Values<V>>) -> Groups<'a, V> {
        Groups { rows }
    }

    /// The number of values, over all groups.
    pub fn len(&self) -> usize {
        self.rows.iter().map(|r| r.as_slice().len()).sum()
    }

    /// True if there are no values (never, for a key map emitted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The groups, one per row that saw the key.
    pub fn rows(&self) -> impl Iterator<Item = &[V]> {
        self.rows.iter().map(Values::as_slice)
    }

    /// Every value, group after group.
    pub fn iter(&self) -> impl Iterator<Item = &V> {
        self.rows.iter().flat_map(Values::as_slice)
    }

    /// The groups, each sorted, merged into one sorted vector: moved when there is one
    /// group, else merged into a freshly allocated buffer in one pass per pair of groups
    /// (Corey §8.5.1: reduce copies a word's indices "to a freshly allocated buffer").
    /// If a group is not sorted the result is sorted anyway (by a sort after the merge).
    pub fn merge_sorted(self) -> Vec<V>
    where
        V: Ord,
    {
        let runs: Vec<Vec<V>> = self.rows.drain(..).map(Values::into_vec).collect();
        let mut all = crate::psrs::merge_all(runs, &|a: &V, b: &V| a.cmp(b));
        if !all.is_sorted() {
            all.sort();
        }
        all
    }

    /// Every value, moved out, group after group: the first group's buffer is reused and
    /// the others copied after it.
    pub fn take_all(self) -> Vec<V> {
        let mut rows = self.rows.drain(..);
        let mut all = rows.next().map(Values::into_vec).unwrap_or_default();
        for more in rows {
            match more {
                Values::One(v) => all.push(v),
                Values::Many(mut vs) => all.append(&mut vs),
            }
        }
        all
    }
}
