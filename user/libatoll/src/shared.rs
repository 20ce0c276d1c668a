//! Memory shared between cores (Corey §3.1, §4.3): SLOT address ranges spliced into the
//! root address range at 1 GiB slots from [`SLOT_BASE`]. A slot range is a page-table
//! subtree: every core whose root range splices it sees the pages any of them faulted
//! in, with no fault of its own. `cfork` splices the caller's slots into the child as
//! they are, so memory set up here before a `cfork` is shared with the child.

use crate::obj::{ar_alloc, ar_set_ar, ar_set_seg, home_share, segment_alloc, share_delobj};
use crate::ObjRef;
use abi::{ar_kind, map, ArSetAr, ArSetSeg, Error};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};

/// First slot address in every program's root range (1 TiB; slots go up from here).
pub const SLOT_BASE: u64 = 0x0100_0000_0000;
/// Size and alignment of a slot (one page-directory-pointer entry).
pub const SLOT_BYTES: u64 = 1 << 30;
/// The address past the last slot (the heap starts there).
const SLOT_END: u64 = crate::heap::HEAP_BASE;
const PAGE: u64 = 4096;

/// The next free slot address. A `cfork` child inherits it, so it never hands out a slot
/// the parent already used.
static NEXT_SLOT: AtomicU64 = AtomicU64::new(SLOT_BASE);
/// An empty SLOT range spliced over slots given back ([`unsplice`]); 0 until needed.
static HOLE: AtomicU64 = AtomicU64::new(0);

/// Reserves `count` consecutive slot addresses of the root range; returns the first.
pub fn slot_vas(count: u64) -> Result<u64, Error> {
    let bytes = count.checked_mul(SLOT_BYTES).ok_or(Error::InvalidArgument)?;
    let va = NEXT_SLOT.fetch_add(bytes, Ordering::Relaxed);
    if va.checked_add(bytes).is_none_or(|end| end > SLOT_END) {
        return Err(Error::NoResources);
    }
    Ok(va)
}

/// A new, empty SLOT range in the home share ([`home_share`]: the root share unless
/// threads run).
pub fn slot_alloc() -> Result<u64, Error> {
    ar_alloc(home_share(), ar_kind::SLOT)
}

/// Splices the SLOT range `range` (in the home share) into the root range at slot `va`.
pub fn splice(va: u64, range: u64) -> Result<(), Error> {
    // Make the hole now, while there is memory: giving a slot back must not fail for
    // want of it.
    hole()?;
    splice_raw(va, range)
}

/// The empty range [`unsplice`] splices over slots given back, made on first use (and
/// again in a `cfork` child that inherited the id of one it cannot name).
fn hole() -> Result<u64, Error> {
    let hole = HOLE.load(Ordering::Relaxed);
    if hole != 0 && crate::obj::obj_get_name(ObjRef::new(home_share(), hole)).is_ok() {
        return Ok(hole);
    }
    let hole = slot_alloc()?;
    HOLE.store(hole, Ordering::Relaxed);
    Ok(hole)
}

fn splice_raw(va: u64, range: u64) -> Result<(), Error> {
    let root = crate::obj::root_ar_ref();
    let set = ArSetAr {
        ar: [root.share, root.object],
        va,
        child: [root.share, range],
        flags: map::WRITE,
    };
    ar_set_ar(&set).map(|_| ())
}

/// Gives back the slot at `va`: an empty range replaces what was spliced there, so the
/// root range lets go of it (an edit replaces what was under it) and, once nothing else
/// holds it, the old range and its pages are freed. The address is not reused.
pub fn unsplice(va: u64) -> Result<(), Error> {
    splice_raw(va, hole()?)
}

/// Maps `pages` pages of segment `seg` (from its page 0) at byte `offset` of a window of
/// consecutive slot ranges `slots` (all in the home share), split at slot boundaries.
pub fn map_in_slots(slots: &[u64], offset: u64, seg: u64, pages: u64) -> Result<(), Error> {
    let home = home_share();
    let mut done = 0;
    while done < pages {
        let at = offset + done * PAGE;
        let slot = *slots.get((at / SLOT_BYTES) as usize).ok_or(Error::InvalidArgument)?;
        let in_slot = at % SLOT_BYTES;
        let n = ((SLOT_BYTES - in_slot) / PAGE).min(pages - done);
        let set = ArSetSeg {
            ar: [home, slot],
            va: in_slot,
            seg: [home, seg],
            first_page: done,
            pages: n,
            flags: map::WRITE,
        };
        ar_set_seg(&set)?;
        done += n;
    }
    Ok(())
}

/// A segment of shared memory: mapped at offset 0 of its own SLOT range, which is
/// spliced into the root range (both objects in the home share).
#[derive(Clone, Copy, Debug)]
pub struct SharedMem {
    /// Where it starts in the address space.
    pub va: u64,
    /// Its size (whole pages).
    pub bytes: u64,
    /// The SLOT range.
    pub range: u64,
    /// The segment.
    pub segment: u64,
}

impl SharedMem {
    /// `bytes` (at most 1 GiB) of zero pages, shared with every later `cfork` child.
    pub fn new(bytes: u64) -> Result<SharedMem, Error> {
        let bytes = bytes.max(1).next_multiple_of(PAGE);
        if bytes > SLOT_BYTES {
            return Err(Error::InvalidArgument);
        }
        let home = home_share();
        let va = slot_vas(1)?;
        let range = slot_alloc()?;
        let made = segment_alloc(home, bytes).and_then(|segment| {
            map_in_slots(&[range], 0, segment, bytes / PAGE)?;
            splice(va, range)?;
            Ok(segment)
        });
        match made {
            Ok(segment) => Ok(SharedMem { va, bytes, range, segment }),
            Err(e) => {
                // The range holds the segment (if mapped): deleting it frees both.
                let _ = share_delobj(ObjRef::new(home, range));
                Err(e)
            }
        }
    }

    /// Gives the memory back (see [`unsplice`]); children that splice it keep it until
    /// they end.
    pub fn free(self) {
        let home = home_share();
        let _ = unsplice(self.va);
        let _ = share_delobj(ObjRef::new(home, self.segment));
        let _ = share_delobj(ObjRef::new(home, self.range));
    }
}

/// Types whose all-zero bytes are a valid value that may be used from several cores at
/// once through `&T` (atomics, arrays and structs of them): what shared memory starts
/// as.
///
/// # Safety
/// The all-zero bit pattern must be a valid `T`, and `T` must be `Sync`.
pub unsafe trait ZeroInit: Sync {}

// SAFETY: zero is a valid atomic integer, and atomics are `Sync`.
unsafe impl ZeroInit for AtomicU64 {}
// SAFETY: an array of zero-valid `Sync` elements is zero-valid and `Sync`.
unsafe impl<T: ZeroInit, const N: usize> ZeroInit for [T; N] {}

/// A `T` in shared memory, reachable from a `static`: the parent calls [`init`] before
/// it cforks, and every child (whose statics are copies of the parent's) calls [`get`].
///
/// [`init`]: SharedStatic::init
/// [`get`]: SharedStatic::get
pub struct SharedStatic<T> {
    va: AtomicU64,
    _t: PhantomData<T>,
}

// SAFETY: it holds only an address; the `T` it leads to is `Sync` (`ZeroInit`).
unsafe impl<T: ZeroInit> Sync for SharedStatic<T> {}

impl<T: ZeroInit> SharedStatic<T> {
    /// Not made yet.
    pub const fn new() -> Self {
        SharedStatic { va: AtomicU64::new(0), _t: PhantomData }
    }

    /// Makes the shared `T` (all zero), once; later calls return the same one.
    pub fn init(&self) -> Result<&'static T, Error> {
        if self.va.load(Ordering::Acquire) == 0 {
            let mem = SharedMem::new(core::mem::size_of::<T>() as u64)?;
            self.va.store(mem.va, Ordering::Release);
        }
        Ok(self.get())
    }

    /// The shared `T`. Panics if [`SharedStatic::init`] was not called before the `cfork`
    /// that made this context (or in this context).
    pub fn get(&self) -> &'static T {
        let va = self.va.load(Ordering::Acquire);
        assert!(va != 0, "SharedStatic used before init");
        // SAFETY: `va` is the start of a SharedMem of at least `size_of::<T>()` bytes,
        // page-aligned, mapped read-write for the life of the program and never freed;
        // its pages start zero, a valid `T` (`ZeroInit`), and `T` is `Sync`.
        unsafe { &*(va as *const T) }
    }
}

impl<T: ZeroInit> Default for SharedStatic<T> {
    fn default() -> Self {
        SharedStatic::new()
    }
}
