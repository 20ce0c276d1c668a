//! The phases of a job on McRT (Corey §6.1): sample, map, reduce, merge. Each phase is
//! one OpenMP-like parallel region (`mcrt::omp`) whose workers take tasks from one shared
//! counter, so a faster worker takes more and a smaller team (McRT short of memory for
//! threads) still does every task. Worker `w` owns row `w` of the intermediate table.

use crate::cell::{ArrayCell, Cell, CellKind, Folded, Grouped, TreeCell};
use crate::job::{Emit, Groups, Job, Key, Values};
use crate::layout::{Edge, Layout, Phase, SharedLayout};
use crate::plan::{self, Sampler, SAMPLE_COLUMNS};
use crate::psrs::{self, slots, Counter};
use crate::{Config, Error};
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::ops::Range;
use mcrt::sync::Mutex;

/// What a job did, for the benchmark and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Workers.
    pub threads: usize,
    /// Map tasks (non-empty ones), sampled ones included.
    pub map_tasks: usize,
    /// Map tasks the sampling phase ran.
    pub sampled_tasks: usize,
    /// Keys the sample predicted (0 when the reduce-task count was given).
    pub predicted_keys: u64,
    /// Reduce tasks: columns of the intermediate table.
    pub reduce_tasks: usize,
    /// Pairs map emitted.
    pub pairs: u64,
    /// Distinct keys: pairs in the output.
    pub keys: usize,
    /// Nanoseconds of each phase, in [`Phase::ALL`] order (by the configured clock).
    pub phase_ns: [u64; 4],
    /// Nanoseconds from the split to the sorted output.
    pub total_ns: u64,
}

impl Stats {
    /// The nanoseconds of `phase`.
    pub fn ns(&self, phase: Phase) -> u64 {
        self.phase_ns[phase as usize]
    }
}

/// A job's result: the reduced pairs in the job's output order, and what it took.
pub struct Output<K, O> {
    /// `(key, reduce's output)` for every distinct key, sorted by [`Job::order`] then key.
    pub pairs: Vec<(K, O)>,
    /// Counts and times.
    pub stats: Stats,
}

/// Runs `job` with `config` in the shared layout ([`SharedLayout`]). Call it from a McRT
/// thread (`mcrt::run`, or [`crate::hosted::run`]).
pub fn run<J: Job>(job: &J, config: &Config) -> Result<Output<J::Key, J::Out>, Error> {
    run_with(job, config, &SharedLayout)
}

/// Runs `job` with `config`, calling `layout` at every phase boundary ([`Layout`]).
pub fn run_with<J: Job>(
    job: &J,
    config: &Config,
    layout: &dyn Layout,
) -> Result<Output<J::Key, J::Out>, Error> {
    config.check()?;
    if !mcrt::in_runtime() {
        return Err(Error::NotInRuntime);
    }
    Ok(match config.cell {
        CellKind::SortedArray if J::COMBINES => {
            execute::<J, ArrayCell<J::Key, J::Value, Folded<J::Value>>>(job, config, layout)
        }
        CellKind::SortedArray => {
            execute::<J, ArrayCell<J::Key, J::Value, Grouped<J::Value>>>(job, config, layout)
        }
        CellKind::BTree => execute::<J, TreeCell<J::Key, J::Value>>(job, config, layout),
    })
}

/// One worker's row of a table: a cell per column, and the pairs it took.
struct Row<C> {
    cells: Vec<C>,
    pairs: u64,
    sampler: Sampler,
}

impl<C: Default> Row<C> {
    fn new(columns: usize) -> Row<C> {
        Row {
            cells: (0..columns).map(|_| C::default()).collect(),
            pairs: 0,
            sampler: Sampler::default(),
        }
    }
}

/// Map's output into a row: the key's hash picks the cell (Corey §6.1). `SAMPLING` also
/// counts new keys for the prediction.
struct RowEmit<'a, J, C, const SAMPLING: bool> {
    job: &'a J,
    row: &'a mut Row<C>,
}

impl<J: Job, C: Cell<J::Key, J::Value>, const SAMPLING: bool> Emit<J::Key, J::Value>
    for RowEmit<'_, J, C, SAMPLING>
{
    #[inline]
    fn emit(&mut self, key: J::Key, value: J::Value) {
        let row = &mut *self.row;
        row.pairs += 1;
        let c = plan::column(key.hash(), row.cells.len());
        let new = row.cells[c].insert(self.job, key, value);
        if SAMPLING {
            row.sampler.pair(new);
        }
    }
}

/// Moves a sample row's keys into the map row of the same worker (Metis's "rehash": the
/// sampled tasks' output is kept, not redone).
fn rehash<J: Job, C: Cell<J::Key, J::Value>>(job: &J, sample: Row<C>, into: &mut Row<C>) {
    into.pairs += sample.pairs;
    let columns = into.cells.len();
    for cell in sample.cells {
        for (key, values) in cell.into_sorted() {
            let c = plan::column(key.hash(), columns);
            into.cells[c].insert_group(job, key, values);
        }
    }
}

fn execute<J: Job, C: Cell<J::Key, J::Value>>(
    job: &J,
    config: &Config,
    layout: &dyn Layout,
) -> Output<J::Key, J::Out> {
    let clock = || config.clock.map_or(0, |c| c());
    let n = config.threads;
    let started = clock();
    let mut stats = Stats { threads: n, ..Stats::default() };
    // One parallel region per phase; the hooks bracket each worker's part.
    let team = |phase: Phase, body: &(dyn Fn(usize) + Sync)| {
        mcrt::omp::parallel(n, |ctx| {
            let w = ctx.thread_num();
            layout.worker(phase, w, Edge::Begin);
            body(w);
            layout.worker(phase, w, Edge::End);
        })
    };
    let mut timed = |phase: Phase, f: &mut dyn FnMut()| {
        layout.phase(phase, Edge::Begin);
        let t0 = clock();
        f();
        stats.phase_ns[phase as usize] = clock().saturating_sub(t0);
        layout.phase(phase, Edge::End);
    };

    let tasks: Vec<Range<usize>> =
        plan::split(job.input_len(), n * config.tasks_per_thread, |at| job.split_at(at));
    let map_task = |t: usize, row: &mut Row<C>, sampling: bool| {
        if sampling {
            job.map(tasks[t].clone(), &mut RowEmit::<J, C, true> { job, row });
        } else {
            job.map(tasks[t].clone(), &mut RowEmit::<J, C, false> { job, row });
        }
    };

    // Sample: the first tasks into a small table per worker; predict the keys.
    let sampled = match config.reduce_tasks {
        Some(_) => 0,
        None => plan::sampled_tasks(tasks.len(), config.sample_percent, n),
    };
    let samples = slots((0..n).map(|_| None::<Row<C>>));
    let mut predicted = 0;
    if sampled > 0 {
        timed(Phase::Sample, &mut || {
            let next = Counter::new(0);
            team(Phase::Sample, &|w| {
                let mut row = Row::new(SAMPLE_COLUMNS);
                while let Some(t) = next.take(sampled) {
                    map_task(t, &mut row, true);
                }
                *samples[w].lock() = Some(row);
            });
            let samplers: Vec<Sampler> =
                samples.iter().filter_map(|s| s.lock().as_ref().map(|r| r.sampler)).collect();
            predicted = plan::predict_keys(&samplers, sampled, tasks.len());
        });
    }
    let columns = config.reduce_tasks.unwrap_or_else(|| plan::reduce_tasks(predicted, n));

    // Map: each worker moves its sample into its row, then takes the remaining tasks.
    let rows: Vec<Mutex<Row<C>>> = slots((0..n).map(|_| Row::new(0)));
    let mut orphans = Vec::new();
    timed(Phase::Map, &mut || {
        let next = Counter::new(sampled);
        team(Phase::Map, &|w| {
            let mut row = Row::new(columns);
            if let Some(sample) = samples[w].lock().take() {
                rehash(job, sample, &mut row);
            }
            while let Some(t) = next.take(tasks.len()) {
                map_task(t, &mut row, false);
            }
            *rows[w].lock() = row;
        });
        // A sample row no map worker took (a smaller team than the sample's) becomes a
        // row of its own: appended to a worker's row it would break the order of values
        // inside a group (task order, `Groups`).
        for s in &samples {
            if let Some(sample) = s.lock().take() {
                let mut row = Row::new(columns);
                rehash(job, sample, &mut row);
                orphans.push(row);
            }
        }
    });

    // Reduce: column c of every row, merged key by key. The cells are regrouped by
    // column first (moving cell headers, not their contents), inside the phase's time.
    let mut pairs_emitted = 0;
    let mut rows = Some(rows);
    let reduced = slots((0..columns).map(|_| Vec::new()));
    timed(Phase::Reduce, &mut || {
        let mut by_column: Vec<Vec<C>> = (0..columns).map(|_| Vec::with_capacity(n)).collect();
        let all = rows.take().unwrap_or_default().into_iter().map(Mutex::into_inner);
        for row in all.chain(core::mem::take(&mut orphans)) {
            pairs_emitted += row.pairs;
            for (c, cell) in row.cells.into_iter().enumerate() {
                by_column[c].push(cell);
            }
        }
        let by_column = slots(by_column);
        let next = Counter::new(0);
        team(Phase::Reduce, &|_| {
            while let Some(c) = next.take(columns) {
                let cells = core::mem::take(&mut *by_column[c].lock());
                *reduced[c].lock() = reduce_column(job, cells);
            }
        });
    });

    // Merge: PSRS over n parts, each a run of consecutive reduce outputs.
    let mut pairs = Vec::new();
    timed(Phase::Merge, &mut || {
        let outputs: Vec<Vec<(J::Key, J::Out)>> =
            reduced.iter().map(|s| core::mem::take(&mut *s.lock())).collect();
        let parts = balance(outputs, n);
        let order = |a: &(J::Key, J::Out), b: &(J::Key, J::Out)| {
            job.order(a, b).then_with(|| a.0.cmp(&b.0))
        };
        let merge_team = |body: &(dyn Fn() + Sync)| team(Phase::Merge, &|_| body());
        pairs = psrs::sort(parts, &order, &merge_team);
    });

    stats.pairs = pairs_emitted;
    stats.map_tasks = tasks.len();
    stats.sampled_tasks = sampled;
    stats.predicted_keys = predicted;
    stats.reduce_tasks = columns;
    stats.keys = pairs.len();
    stats.total_ns = clock().saturating_sub(started);
    Output { pairs, stats }
}

/// Groups consecutive reduce outputs into `parts` runs of about equal length (PSRS's
/// parts; each worker concatenates and sorts one).
fn balance<T>(outputs: Vec<Vec<T>>, parts: usize) -> Vec<Vec<Vec<T>>> {
    let total: usize = outputs.iter().map(Vec::len).sum();
    let per_part = total.div_ceil(parts.max(1)).max(1);
    let mut out: Vec<Vec<Vec<T>>> = Vec::with_capacity(parts);
    let mut current = Vec::new();
    let mut len = 0;
    for o in outputs {
        len += o.len();
        current.push(o);
        if len >= per_part {
            out.push(core::mem::take(&mut current));
            len = 0;
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A key with its values in a cell.
type Entry<J> = (<J as Job>::Key, Values<<J as Job>::Value>);

/// Reduce task: merges one column's cells (each sorted by key) and reduces each key's
/// groups, in key order.
fn reduce_column<J: Job, C: Cell<J::Key, J::Value>>(
    job: &J,
    cells: Vec<C>,
) -> Vec<(J::Key, J::Out)> {
    let mut runs: Vec<_> = cells.into_iter().map(|c| c.into_sorted().into_iter()).collect();
    let mut heads: Vec<Option<Entry<J>>> = runs.iter_mut().map(Iterator::next).collect();
    let mut out = Vec::new();
    let mut hits: Vec<usize> = Vec::with_capacity(runs.len());
    let mut groups: Vec<Values<J::Value>> = Vec::with_capacity(runs.len());
    loop {
        // The smallest head key, and every row whose head has it (in row order).
        let mut min: Option<&J::Key> = None;
        for (k, _) in heads.iter().flatten() {
            if min.is_none_or(|m| k.cmp(m) == Ordering::Less) {
                min = Some(k);
            }
        }
        let Some(min) = min else { break };
        hits.clear();
        hits.extend((0..heads.len()).filter(|&i| heads[i].as_ref().is_some_and(|(k, _)| k == min)));
        let mut key = None;
        for &i in &hits {
            if let Some((k, values)) = heads[i].take() {
                key.get_or_insert(k);
                groups.push(values);
            }
            heads[i] = runs[i].next();
        }
        if let Some(key) = key {
            let reduced = job.reduce(&key, Groups::new(&mut groups));
            groups.clear();
            out.push((key, reduced));
        }
    }
    out
}
