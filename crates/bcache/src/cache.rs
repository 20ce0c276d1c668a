//! The cache: lookups in the lock-free tree, copies under the scalable read-write lock,
//! copy-on-write into the writing core's own buffers, eviction and write-back (Corey §5.3),
//! and per-core private blocks (after Corey §9).
//!
//! A shared block's tree entry ([`Entry`]) names the buffer holding it, whether it is dirty,
//! and a version bumped by every change. All changes are compare-and-swaps on the whole
//! entry, so a core that read an entry, then did something slow (a device read, a copy), can
//! tell whether anything happened to the block meanwhile: no ABA, even when the same buffer
//! comes back for the same block.

use crate::pool::{BufId, PerCore, Pool, Resident};
use crate::sync::Spin;
use crate::tree::RadixTree;
use crate::words::Words;
use crate::{BlockDevice, Config, ConfigError, Error, Stats};
use alloc::vec::Vec;
use core::mem;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use locks::{McsLock, RwLock};

/// Eviction frees up to `buffers_per_core / EVICT_FRACTION` buffers at once (at least 1),
/// so the read-write lock is taken for writing once per batch, not once per miss.
const EVICT_FRACTION: usize = 8;

/// The entry bit that marks a dirty block.
const DIRTY: u64 = 1 << 32;

/// Where an entry's version starts; 31 bits, so a compare-and-swap could be fooled only by
/// 2^31 changes to one block between a core's load and its swap.
const VERSION_SHIFT: u32 = 33;

/// A tree entry: bits 0..32 hold the buffer id + 1 (0: not cached), bit 32 the dirty bit,
/// bits 33..64 the version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry(u64);

/// Whether a block differs from the device's copy (no boolean arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Clean,
    Dirty,
}

impl Entry {
    /// No buffer, version 0 (also what a never-created leaf reads as).
    const EMPTY: Entry = Entry(0);

    /// The buffer holding the block, if cached.
    fn buf(self) -> Option<BufId> {
        (self.0 as u32).checked_sub(1)
    }

    /// Whether the cached block must be written back.
    fn dirty(self) -> bool {
        self.0 & DIRTY != 0
    }

    /// The entry that replaces this one: `buf` in `state`, the next version.
    fn then(self, buf: Option<BufId>, state: State) -> Entry {
        let version = (self.0 >> VERSION_SHIFT).wrapping_add(1) << VERSION_SHIFT;
        let dirty = if state == State::Dirty { DIRTY } else { 0 };
        Entry(version | dirty | buf.map_or(0, |b| b as u64 + 1))
    }
}

/// What one attempt at a shared write found.
enum WriteStep {
    /// Our buffer is in the tree; it replaced this one, if any.
    Linked(Option<BufId>),
    /// The block changed under us: try again.
    Retry,
    /// The block is not cached and the write is partial: fill from the device, expecting
    /// the entry to still be this.
    NeedsDevice(Entry),
}

/// A write-back buffer cache over block device `D`, shared by `Config::cores` cores.
///
/// ```
/// use bcache::{BlockDevice, Cache, Config};
/// use std::sync::Mutex;
///
/// struct Ram(Mutex<Vec<u8>>);
/// impl BlockDevice for Ram {
///     type Error = ();
///     fn blocks(&self) -> u64 { 16 }
///     fn read_block(&self, n: u64, buf: &mut [u8]) -> Result<(), ()> {
///         let at = n as usize * 512;
///         buf.copy_from_slice(&self.0.lock().unwrap()[at..at + 512]);
///         Ok(())
///     }
///     fn write_block(&self, n: u64, buf: &[u8]) -> Result<(), ()> {
///         let at = n as usize * 512;
///         self.0.lock().unwrap()[at..at + 512].copy_from_slice(buf);
///         Ok(())
///     }
/// }
///
/// let config = Config { cores: 2, block_size: 512, buffers_per_core: 4 };
/// let cache = Cache::new(Ram(Mutex::new(vec![0; 16 * 512])), config).unwrap();
/// cache.write(1, 3, 10, b"hello").unwrap(); // core 1 writes bytes 10..15 of block 3
/// let mut out = [0u8; 5];
/// cache.read(0, 3, 10, &mut out).unwrap(); // core 0 finds it in the shared tree
/// assert_eq!(&out, b"hello");
/// cache.sync(0).unwrap();
/// assert_eq!(&cache.device().0.lock().unwrap()[3 * 512 + 10..3 * 512 + 15], b"hello");
/// ```
pub struct Cache<D: BlockDevice> {
    pub(crate) device: D,
    pub(crate) block_size: usize,
    pub(crate) per_core: usize,
    /// Block number → entry (Corey §5.3's lock-free tree).
    pub(crate) tree: RadixTree,
    /// Every buffer; core `c` owns `c * per_core .. (c + 1) * per_core`.
    pub(crate) bufs: Vec<Words>,
    pub(crate) cores: Vec<PerCore>,
    /// Held for reading while a shared buffer is copied; taken for writing before retired
    /// buffers are reused (Corey §5.3). It guards no data of its own.
    pub(crate) readers: RwLock<()>,
    /// Orders write-backs of shared blocks, so an older copy of a block can never reach the
    /// device after a newer one; holds the block-sized copy being written.
    pub(crate) writeback: McsLock<Vec<u8>>,
}

impl<D: BlockDevice> Cache<D> {
    /// An empty cache over `device`, allocating all its buffers now.
    pub fn new(device: D, config: Config) -> Result<Self, ConfigError> {
        let Config { cores, block_size, buffers_per_core } = config;
        if cores == 0 {
            return Err(ConfigError::NoCores);
        }
        if block_size == 0 || block_size % 8 != 0 {
            return Err(ConfigError::BadBlockSize(block_size));
        }
        if buffers_per_core == 0 {
            return Err(ConfigError::NoBuffers);
        }
        let total = cores.checked_mul(buffers_per_core).ok_or(ConfigError::TooManyBuffers)?;
        if total >= u32::MAX as usize {
            return Err(ConfigError::TooManyBuffers);
        }
        Ok(Cache {
            tree: RadixTree::new(device.blocks()),
            device,
            block_size,
            per_core: buffers_per_core,
            bufs: (0..total).map(|_| Words::new(block_size)).collect(),
            cores: (0..cores).map(|c| PerCore::new(c, buffers_per_core)).collect(),
            readers: RwLock::with_readers((), cores),
            writeback: McsLock::new(Vec::new()),
        })
    }

    /// The device underneath (dirty blocks are not on it until written back).
    pub fn device(&self) -> &D {
        &self.device
    }

    /// Bytes per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Core `core`'s counters.
    pub fn stats(&self, core: usize) -> Result<Stats, Error<D::Error>> {
        self.cores.get(core).map(PerCore::stats).ok_or(Error::NoSuchCore(core))
    }

    /// Whether `block` is cached, for core `core` (its private blocks, else the shared
    /// tree). A lookup in the tree takes no lock and writes nothing (Corey §5.3).
    pub fn contains(&self, core: usize, block: u64) -> Result<bool, Error<D::Error>> {
        self.check(core, block, 0, 0)?;
        if let Some(cached) =
            self.private(core, block, |p| p.private.get(&block).is_some_and(Option::is_some))
        {
            return Ok(cached);
        }
        Ok(self.entry(block).buf().is_some())
    }

    /// Copies bytes `offset..offset + out.len()` of `block` into `out`, reading the block
    /// from the device into a buffer of core `core` on a miss.
    pub fn read(
        &self,
        core: usize,
        block: u64,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), Error<D::Error>> {
        self.check(core, block, offset, out.len())?;
        if let Some(r) =
            self.private(core, block, |p| self.private_read(core, p, block, offset, out))
        {
            return r;
        }
        let me = &self.cores[core];
        loop {
            // Corey §5.3: find the buffer in the tree and copy it out inside a read section,
            // so it cannot be reclaimed and refilled halfway through the copy.
            let seen = self.readers.read(core, |()| {
                let seen = self.entry(block);
                if let Some(buf) = seen.buf() {
                    self.bufs[buf as usize].load_into(offset, out);
                }
                seen
            });
            if seen.buf().is_some() {
                PerCore::count(&me.hits, 1);
                return Ok(());
            }
            PerCore::count(&me.misses, 1);
            // A miss: fill one of our own buffers from the device, outside any read section,
            // then link it unless the block changed meanwhile.
            let buf = self.alloc(core)?;
            if let Err(e) = self.fill(core, buf, block) {
                self.free(core, buf);
                return Err(e);
            }
            let linked = self.readers.read(core, |()| {
                let linked = self.swap(block, seen, Some(buf), State::Clean);
                if linked {
                    self.bufs[buf as usize].load_into(offset, out);
                }
                linked
            });
            if linked {
                me.pool.with(|p| p.resident.push_back(Resident { buf, block }));
                return Ok(());
            }
            // Another core cached the block first (or wrote it): ours was never seen.
            self.free(core, buf);
        }
    }

    /// Writes `data` at bytes `offset..offset + data.len()` of `block`. The block is copied
    /// into a fresh buffer of core `core`'s pool, changed there, and swapped into the tree
    /// (Corey §5.3: the copy lands in the writing core's cache); the buffer it replaces is
    /// retired. A partial write of an uncached block first reads it from the device.
    pub fn write(
        &self,
        core: usize,
        block: u64,
        offset: usize,
        data: &[u8],
    ) -> Result<(), Error<D::Error>> {
        self.check(core, block, offset, data.len())?;
        if let Some(r) =
            self.private(core, block, |p| self.private_write(core, p, block, offset, data))
        {
            return r;
        }
        let me = &self.cores[core];
        let whole = offset == 0 && data.len() == self.block_size;
        let buf = self.alloc(core)?;
        let new = &self.bufs[buf as usize];
        loop {
            // The copy of the old buffer needs the read section (it may be retired and
            // reclaimed meanwhile); the version in the entry catches any change since.
            let step = self.readers.read(core, |()| {
                let seen = self.entry(block);
                match seen.buf() {
                    None if !whole => return WriteStep::NeedsDevice(seen),
                    Some(old) if !whole => new.copy_from(&self.bufs[old as usize]),
                    _ => {}
                }
                new.store_from(offset, data);
                if self.swap(block, seen, Some(buf), State::Dirty) {
                    WriteStep::Linked(seen.buf())
                } else {
                    WriteStep::Retry
                }
            });
            match step {
                WriteStep::Linked(old) => {
                    PerCore::count(if old.is_some() { &me.hits } else { &me.misses }, 1);
                    if let Some(old) = old {
                        self.retire(old);
                    }
                    me.pool.with(|p| p.resident.push_back(Resident { buf, block }));
                    return Ok(());
                }
                WriteStep::Retry => {}
                WriteStep::NeedsDevice(seen) => {
                    PerCore::count(&me.misses, 1);
                    if let Err(e) = self.fill(core, buf, block) {
                        self.free(core, buf);
                        return Err(e);
                    }
                    new.store_from(offset, data);
                    if self.swap(block, seen, Some(buf), State::Dirty) {
                        me.pool.with(|p| p.resident.push_back(Resident { buf, block }));
                        return Ok(());
                    }
                    // The block was cached or changed while we read the device: start over
                    // from the cached copy.
                }
            }
        }
    }

    /// Drops `block` from the cache, writing it back first if it is dirty; the next read
    /// comes from the device.
    pub fn invalidate(&self, core: usize, block: u64) -> Result<(), Error<D::Error>> {
        self.check(core, block, 0, 0)?;
        let private = self.private(core, block, |pool| {
            self.write_back_private(core, pool, block)?;
            if let Some(Some(p)) = pool.private.insert(block, None) {
                pool.free.push(p.buf);
            }
            Ok(())
        });
        if let Some(r) = private {
            return r;
        }
        loop {
            let seen = self.entry(block);
            let Some(buf) = seen.buf() else { return Ok(()) };
            if seen.dirty() {
                self.write_back_shared(core, block)?;
            } else if self.swap(block, seen, None, State::Clean) {
                self.retire(buf);
                return Ok(());
            }
        }
    }

    /// Writes every dirty block back, shared and private, in block order. Blocks dirtied
    /// while `sync` runs may or may not be written. On a device error the blocks not yet
    /// written stay dirty.
    pub fn sync(&self, core: usize) -> Result<(), Error<D::Error>> {
        self.check_core(core)?;
        // (block, owner if private).
        let mut dirty: Vec<(u64, Option<usize>)> = Vec::new();
        // Relaxed: only picks candidates; each write-back rereads its entry with Acquire.
        self.tree.for_each(|block, e| {
            if Entry(e.load(Relaxed)).dirty() {
                dirty.push((block, None));
            }
        });
        for (c, per) in self.cores.iter().enumerate() {
            if per.private_blocks.load(Relaxed) == 0 {
                continue;
            }
            per.pool.with(|p| {
                for (&block, b) in &p.private {
                    if b.is_some_and(|b| b.dirty) {
                        dirty.push((block, Some(c)));
                    }
                }
            });
        }
        dirty.sort_unstable();
        for (block, owner) in dirty {
            match owner {
                None => self.write_back_shared(core, block)?,
                Some(c) => self.cores[c].pool.with(|p| self.write_back_private(core, p, block))?,
            }
        }
        Ok(())
    }

    // ---- Checks and tree entries ----

    /// Refuses a core, block or byte range the cache does not have.
    pub(crate) fn check(
        &self,
        core: usize,
        block: u64,
        offset: usize,
        len: usize,
    ) -> Result<(), Error<D::Error>> {
        self.check_core(core)?;
        if block >= self.tree.keys() {
            return Err(Error::NoSuchBlock(block));
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.block_size => Ok(()),
            _ => Err(Error::OutOfBlock { offset, len }),
        }
    }

    fn check_core(&self, core: usize) -> Result<(), Error<D::Error>> {
        if core < self.cores.len() {
            Ok(())
        } else {
            Err(Error::NoSuchCore(core))
        }
    }

    /// `block`'s tree entry. Acquire: pairs with the Release swap that linked the buffer,
    /// so its bytes are visible before we copy them.
    fn entry(&self, block: u64) -> Entry {
        self.tree.entry(block).map_or(Entry::EMPTY, |e| Entry(e.load(Acquire)))
    }

    /// Replaces `block`'s entry `seen` by `buf` in `state` (next version); false if the
    /// entry is no longer `seen`.
    fn swap(&self, block: u64, seen: Entry, buf: Option<BufId>, state: State) -> bool {
        let Some(e) = self.tree.entry_or_insert(block) else { return false };
        // Release: publishes a new buffer's bytes to the Acquire lookups that find it, and
        // orders a write-back's device write before the clean entry evictors look for.
        // Relaxed on failure: the caller rereads the entry with Acquire before using it.
        e.compare_exchange(seen.0, seen.then(buf, state).0, Release, Relaxed).is_ok()
    }

    // ---- Buffers: allocation, reclamation, eviction (Corey §5.3) ----

    /// A free buffer from core `core`'s own pool.
    fn alloc(&self, core: usize) -> Result<BufId, Error<D::Error>> {
        self.cores[core].pool.with(|pool| self.alloc_locked(core, pool))
    }

    /// `alloc` with the pool lock held: the free list, else reclaimed buffers, else
    /// evicted ones.
    pub(crate) fn alloc_locked(
        &self,
        core: usize,
        pool: &mut Pool,
    ) -> Result<BufId, Error<D::Error>> {
        let me = &self.cores[core];
        loop {
            if let Some(buf) = pool.free.pop() {
                return Ok(buf);
            }
            me.retired.with(|r| mem::swap(r, &mut pool.spare));
            if pool.spare.is_empty() {
                self.evict(core, pool)?;
            } else {
                self.reclaim(pool);
            }
        }
    }

    /// Returns a buffer nobody else has seen to core `core`'s free list.
    fn free(&self, core: usize, buf: BufId) {
        self.cores[core].pool.with(|p| p.free.push(buf));
    }

    /// Hands a buffer just unlinked from the tree to its owner, to be reused once no
    /// reader can still be copying it.
    fn retire(&self, buf: BufId) {
        self.cores[buf as usize / self.per_core].retired.with(|r| r.push(buf));
    }

    /// Moves the retired buffers taken into `pool.spare` to the free list.
    fn reclaim(&self, pool: &mut Pool) {
        // Corey §5.3: taking the lock for writing waits until every reader inside has left.
        // Each of these buffers was unlinked before it was retired, so a reader that enters
        // after this cannot find it, and one that found it earlier has now finished.
        self.readers.write(|()| ());
        let batch = &mut pool.spare;
        batch.sort_unstable();
        pool.resident.retain(|r| batch.binary_search(&r.buf).is_err());
        pool.free.append(batch);
    }

    /// Frees some of core `core`'s buffers: up to a batch of its clean blocks, shared ones
    /// oldest first, then private ones; if all are dirty, writes the oldest back first. If
    /// other cores have replaced our buffers and are about to retire them, waits for that.
    fn evict(&self, core: usize, pool: &mut Pool) -> Result<(), Error<D::Error>> {
        let me = &self.cores[core];
        let want = (self.per_core / EVICT_FRACTION).max(1);
        loop {
            let (mut evicted, mut replaced, mut raced, mut dirty) = (0, false, false, None);
            let mut i = 0;
            while i < pool.resident.len() && evicted < want {
                let r = pool.resident[i];
                let seen = self.entry(r.block);
                if seen.buf() != Some(r.buf) {
                    // Another core replaced it and retires it to us (reclaim drops the entry).
                    replaced = true;
                } else if seen.dirty() {
                    dirty = dirty.or(Some(r.block));
                } else if self.swap(r.block, seen, None, State::Clean) {
                    pool.resident.remove(i);
                    me.retired.with(|retired| retired.push(r.buf));
                    evicted += 1;
                    continue;
                } else {
                    raced = true;
                }
                i += 1;
            }
            for b in pool.private.values_mut() {
                if evicted == want {
                    break;
                }
                if let Some(p) = b.filter(|p| !p.dirty) {
                    // Nobody else ever reads a private buffer: no need to retire it.
                    pool.free.push(p.buf);
                    *b = None;
                    evicted += 1;
                }
            }
            if evicted > 0 {
                PerCore::count(&me.evictions, evicted as u64);
                return Ok(());
            }
            if raced {
                continue;
            }
            if replaced {
                // The replacing cores take only our `retired` lock, never the pool lock we
                // hold, so they finish; `alloc_locked` then reclaims.
                let mut spin = Spin::new();
                while me.retired.with(|r| r.is_empty()) {
                    spin.wait();
                }
                return Ok(());
            }
            // Everything is dirty: write the oldest back, then it is clean (or replaced).
            if let Some(block) = dirty {
                self.write_back_shared(core, block)?;
                continue;
            }
            let dirty = pool.private.iter().find(|(_, b)| b.is_some_and(|b| b.dirty));
            match dirty.map(|(&block, _)| block) {
                Some(block) => self.write_back_private(core, pool, block)?,
                None => return Err(Error::NoBuffer),
            }
        }
    }

    // ---- Device transfers ----

    /// Reads `block` from the device into buffer `buf` (not yet linked), through core
    /// `core`'s scratch buffer; no lock is held during the read.
    fn fill(&self, core: usize, buf: BufId, block: u64) -> Result<(), Error<D::Error>> {
        let me = &self.cores[core];
        let mut scratch = me.pool.with(|p| mem::take(&mut p.scratch));
        let r = self.fill_from(&mut scratch, buf, block);
        me.pool.with(|p| p.scratch = scratch);
        r
    }

    /// Reads `block` into buffer `buf` through `scratch`.
    pub(crate) fn fill_from(
        &self,
        scratch: &mut Vec<u8>,
        buf: BufId,
        block: u64,
    ) -> Result<(), Error<D::Error>> {
        scratch.resize(self.block_size, 0);
        self.device.read_block(block, scratch).map_err(Error::Device)?;
        self.bufs[buf as usize].store_from(0, scratch);
        Ok(())
    }

    /// Writes shared `block` back if it is dirty, and marks it clean unless it changed
    /// meanwhile (a newer copy stays dirty). Write-backs go one at a time, so the device
    /// never receives an older copy after a newer one.
    fn write_back_shared(&self, core: usize, block: u64) -> Result<(), Error<D::Error>> {
        self.writeback.with(|copy| {
            copy.resize(self.block_size, 0);
            let seen = self.readers.read(core, |()| {
                let seen = self.entry(block);
                match seen.buf() {
                    Some(buf) if seen.dirty() => {
                        self.bufs[buf as usize].load_into(0, copy);
                        Some(seen)
                    }
                    _ => None,
                }
            });
            let Some(seen) = seen else { return Ok(()) };
            self.device.write_block(block, copy).map_err(Error::Device)?;
            PerCore::count(&self.cores[core].writebacks, 1);
            // Clean only if still this copy: a write since made a newer, dirty one.
            self.swap(block, seen, seen.buf(), State::Clean);
            Ok(())
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_buffer_dirty_bit_and_version() {
        assert_eq!(Entry::EMPTY.buf(), None);
        let a = Entry::EMPTY.then(Some(0), State::Dirty);
        assert_eq!((a.buf(), a.dirty()), (Some(0), true));
        let b = a.then(Some(0), State::Clean);
        assert_eq!((b.buf(), b.dirty()), (Some(0), false));
        assert_ne!(a, b);
        let c = b.then(None, State::Clean);
        assert_eq!(c.buf(), None);
        assert_ne!(c, Entry::EMPTY, "an emptied entry differs from a never-used one");
        let top = Entry(!DIRTY).then(Some(u32::MAX - 1), State::Dirty);
        assert_eq!((top.buf(), top.dirty(), top.0 >> VERSION_SHIFT), (Some(u32::MAX - 1), true, 0));
    }
}
