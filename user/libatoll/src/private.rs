//! Private mappings: segments mapped at fresh addresses of the root range, between
//! [`PRIVATE_BASE`] and the shared slots (thread stacks, benchmark memory). An address is
//! never handed out twice, so a context that still has an old page of a freed mapping in
//! its private tables never sees it change under it (other contexts on the same root keep
//! their faulted pages until their next edit of the range).

use crate::obj::obj_get_name;
use crate::obj::{ar_set_seg, home_share, root_ar_ref, root_share, segment_alloc, share_delobj};
use crate::ObjRef;
use abi::{map, ArSetSeg, Error};
use core::sync::atomic::{AtomicU64, Ordering};

/// First address of private mappings (128 GiB: far above the image, below the slots).
pub const PRIVATE_BASE: u64 = 0x20_0000_0000;
/// The end of the private area (the first slot).
const PRIVATE_END: u64 = crate::shared::SLOT_BASE;
/// An unmapped page left after each mapping, so running off its end faults.
const GUARD: u64 = 4096;
const PAGE: u64 = 4096;

/// The next free address. Threads share it (it is in the image's data); a `cfork` child
/// inherits it, so it never maps over what the parent had mapped.
static NEXT: AtomicU64 = AtomicU64::new(PRIVATE_BASE);

/// A segment mapped in the root range by [`map_new`].
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    /// Its first address.
    pub va: u64,
    /// Its size (whole pages).
    pub bytes: u64,
    /// The segment, in the home share ([`home_share`]) at the time it was made.
    pub segment: u64,
}

/// A new segment of `bytes` of zero pages (each filled on first touch from the touching
/// core's memory) in the home share, mapped read-write at a fresh address of the root
/// range.
pub fn map_new(bytes: u64) -> Result<Mapping, Error> {
    let bytes = bytes.max(1).next_multiple_of(PAGE);
    let span = bytes.checked_add(GUARD).ok_or(Error::InvalidArgument)?;
    let va = NEXT.fetch_add(span, Ordering::Relaxed);
    if va.checked_add(span).is_none_or(|end| end > PRIVATE_END) {
        return Err(Error::NoResources);
    }
    let segment = map_segment_at(va, bytes)?;
    Ok(Mapping { va, bytes, segment })
}

/// A new segment of `bytes` (whole pages) in the home share, mapped read-write at `va` of
/// the root range; its id. Nothing is left behind if it cannot be mapped.
pub fn map_segment_at(va: u64, bytes: u64) -> Result<u64, Error> {
    let home = home_share();
    let segment = segment_alloc(home, bytes)?;
    let ar = root_ar_ref();
    let set = ArSetSeg {
        ar: [ar.share, ar.object],
        va,
        seg: [home, segment],
        first_page: 0,
        pages: bytes / PAGE,
        flags: map::WRITE,
    };
    if let Err(e) = ar_set_seg(&set) {
        let _ = share_delobj(ObjRef::new(home, segment));
        return Err(e);
    }
    Ok(segment)
}

/// Object `id` as the caller can name it: through the home share, else the root share.
pub fn named(id: u64) -> Option<ObjRef> {
    [home_share(), root_share()]
        .into_iter()
        .map(|share| ObjRef::new(share, id))
        .find(|r| obj_get_name(*r).is_ok())
}

/// An empty segment mapped read-only over memory given back: the root range lets go of
/// what was there (there is no unmap call), and any touch of it faults. One serves every
/// hole; a `cfork` child inherits it, threads share it.
static TOMBSTONE: AtomicU64 = AtomicU64::new(0);

/// The tombstone segment, made on first use (and again where the inherited id cannot be
/// named).
fn tombstone() -> Result<ObjRef, Error> {
    let id = TOMBSTONE.load(Ordering::Relaxed);
    if let Some(r) = (id != 0).then(|| named(id)).flatten() {
        return Ok(r);
    }
    let home = home_share();
    let id = segment_alloc(home, 0)?;
    TOMBSTONE.store(id, Ordering::Relaxed);
    Ok(ObjRef::new(home, id))
}

/// Gives back the `bytes` mapped at `va` by [`map_new`]: the tombstone is mapped over
/// them, and the caller's share lets go of the segment, so it and its pages are freed.
/// (The caller's tables forget those pages; any other context that still maps them keeps
/// its frames until it ends, and nobody maps the address again.)
pub fn free(va: u64, bytes: u64) {
    let Ok(id) = crate::obj::ar_get(root_ar_ref(), va) else { return };
    let (Some(seg), Ok(tomb)) = (named(id), tombstone()) else { return };
    if seg.object == tomb.object {
        return; // given back already
    }
    let ar = root_ar_ref();
    let set = ArSetSeg {
        ar: [ar.share, ar.object],
        va,
        seg: [tomb.share, tomb.object],
        first_page: 0,
        pages: bytes.div_ceil(PAGE),
        flags: 0,
    };
    if ar_set_seg(&set).is_ok() {
        let _ = share_delobj(seg);
    }
}
