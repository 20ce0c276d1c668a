//! The buffer cache's logic, for the kernel's block devices (issue M13 item 2). It keeps
//! blocks of a [`BlockDevice`] in memory, shared by all cores, and writes them back later
//! (write-back): a [`Cache`] is created with a fixed number of block buffers per core and
//! every call names the calling core (`0..cores`), so the kernel passes its core number
//! and nothing here needs thread-locals.
//!
//! Corey §5.3 found three techniques that make a shared buffer cache scale; all three are
//! here:
//! 1. **A lock-free tree** ([`tree::RadixTree`]): a radix tree keyed by block number whose
//!    nodes are added with compare-and-swap and never freed while the cache lives, so a
//!    lookup is a few loads and writes no shared line.
//! 2. **Per-core block allocators** (`pool`): each core owns a pool of buffers. A write
//!    copies the new bytes into a buffer from the *writing* core's pool (likely in its
//!    hardware cache) and swaps it into the tree; the old buffer is retired. Buffers a tree
//!    reader can see are therefore never written in place (copy on write).
//! 3. **A scalable read-write lock** ([`locks::RwLock`], reused from `crates/locks`): every
//!    copy out of a shared buffer runs inside a read section (one add on the reader's own
//!    slot), and a core reuses retired buffers only after taking the lock once for writing,
//!    so a block is never freed or reused during a read. Retired buffers are reclaimed in
//!    batches when a core's free list runs dry, so writers are rare.
//!
//! Beyond Corey, after its §9 (applications controlling the sharing of buffer-cache
//! entries): a block made private to a core ([`Cache::make_private`]; the file system does
//! this for every block of a file private to that core) lives in that core's own map, found
//! and updated under the core's own lock without touching the shared tree.
//!
//! Memory is bounded: when a core's pool is empty it reclaims retired buffers or evicts its
//! oldest clean blocks (writing one dirty block back first if all are dirty). [`Cache::sync`]
//! writes every dirty block back in block order. Device errors come back as
//! [`Error::Device`]; nothing here panics on device or caller input.
//!
//! The lock order is: a core's pool lock, then the write-back lock, then the read-write
//! lock. Device I/O runs under a pool lock (misses and writes of private blocks, eviction)
//! or under the write-back lock, never inside a read section.
//!
//! Tests: `cargo test -p bcache` (unit tests, a proptest against a `HashMap` model, a
//! threaded stress test); the loom models run with
//! `RUSTFLAGS="--cfg loom" cargo test -p bcache --release --test loom`. Measurements of the
//! tree against a locked `BTreeMap` are in `docs/bcache.md` (`bench-host bcache`).
#![no_std]
// `unsafe` only in `tree` (following the node pointers it publishes), which allows it.
#![deny(unsafe_code, unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod cache;
mod pool;
mod private;
mod sync;
pub mod tree;
mod words;

pub use cache::Cache;

use core::fmt;

/// A block device: fixed-size blocks `0..blocks()`, read and written whole. Several cores
/// may call it at once (the cache never calls it inside a read section), so it takes
/// `&self` and does its own locking.
pub trait BlockDevice: Sync {
    /// What a failed transfer reports; handed back to the cache's caller in
    /// [`Error::Device`].
    type Error: fmt::Debug;

    /// The number of blocks.
    fn blocks(&self) -> u64;

    /// Reads block `block` into `buf` (exactly one block long).
    fn read_block(&self, block: u64, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Writes `buf` (exactly one block long) to block `block`.
    fn write_block(&self, block: u64, buf: &[u8]) -> Result<(), Self::Error>;
}

/// The shape of a cache, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Cores that will call the cache, numbered `0..cores`.
    pub cores: usize,
    /// Bytes per block: the device's block size (a non-zero multiple of 8, e.g. 4096).
    pub block_size: usize,
    /// Block buffers each core owns: the cache holds at most `cores * buffers_per_core`
    /// blocks (at least 1; 2 or more lets a write keep the block it replaces cached).
    pub buffers_per_core: usize,
}

/// Why a [`Config`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `cores` was 0.
    NoCores,
    /// The block size was 0 or not a multiple of 8.
    BadBlockSize(usize),
    /// `buffers_per_core` was 0.
    NoBuffers,
    /// More buffers in all than a 32-bit buffer id can name.
    TooManyBuffers,
}

/// Why a cache operation failed. The cache is unchanged by a failed operation except that
/// blocks written back before the failure are clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error<E> {
    /// The device failed a transfer.
    Device(E),
    /// The core index is not below the configured number of cores.
    NoSuchCore(usize),
    /// The block number is not below the device's number of blocks.
    NoSuchBlock(u64),
    /// The byte range `offset..offset + len` does not fit in a block.
    OutOfBlock {
        /// The first byte asked for.
        offset: usize,
        /// The number of bytes asked for.
        len: usize,
    },
    /// The core has no buffer it can free: all are in use by operations of the same core
    /// index running at once (one operation per core at a time never sees this).
    NoBuffer,
}

impl<E: fmt::Debug> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Device(e) => write!(f, "block device error: {e:?}"),
            Error::NoSuchCore(c) => write!(f, "no core {c}"),
            Error::NoSuchBlock(b) => write!(f, "no block {b}"),
            Error::OutOfBlock { offset, len } => {
                write!(f, "bytes {offset}..{} are outside the block", offset + len)
            }
            Error::NoBuffer => write!(f, "no buffer to free on this core"),
        }
    }
}

/// One core's counters since the cache was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Reads and writes that found the block cached.
    pub hits: u64,
    /// Reads and writes that did not (a partial write then reads the device).
    pub misses: u64,
    /// Clean blocks dropped to free a buffer.
    pub evictions: u64,
    /// Dirty blocks written to the device (by `sync`, eviction, invalidation).
    pub writebacks: u64,
}

impl core::ops::Add for Stats {
    type Output = Stats;

    fn add(self, o: Stats) -> Stats {
        Stats {
            hits: self.hits + o.hits,
            misses: self.misses + o.misses,
            evictions: self.evictions + o.evictions,
            writebacks: self.writebacks + o.writebacks,
        }
    }
}
