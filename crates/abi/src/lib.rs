//! The Atoll system-call ABI: one source of truth for the kernel and user programs.
//!
//! A call is made with `syscall`: the number in `rax`, up to five arguments in `rdi`,
//! `rsi`, `rdx`, `r10`, `r8`. The result comes back in `rax` as a [`SysResult`] word:
//! non-negative values are successes, negative values are `-(Error as i64)`. No call
//! panics the kernel; every bad argument is an error code.
#![no_std]
#![forbid(unsafe_code)]

/// System call numbers.
pub mod nr {
    /// `null()`: does nothing (measures the syscall path).
    pub const NULL: u64 = 0;
    /// `write(ptr, len)`: writes bytes to the console; returns the count.
    pub const WRITE: u64 = 1;
    /// `exit(code)`: ends the program on this core; never returns.
    pub const EXIT: u64 = 2;
    /// `pcore_current()`: the index of the core running the caller (Corey §4.4).
    pub const PCORE_CURRENT: u64 = 3;
    /// `cycles()`: the time-stamp counter.
    pub const CYCLES: u64 = 4;
    /// `args(ptr, len)`: copies the program's argument string; returns its length.
    pub const ARGS: u64 = 5;
    /// `root_share()`: the id of the caller's root share (Corey §3.3).
    pub const ROOT_SHARE: u64 = 6;
    /// `root_ar()`: the id of the caller's root address range (faults resolve through it).
    pub const ROOT_AR: u64 = 7;
    /// `share_alloc(parent)`: a new share, placed in share `parent`; returns its id.
    pub const SHARE_ALLOC: u64 = 8;
    /// `share_addobj(share, ref_share, ref_obj)`: puts the object ⟨ref_share, ref_obj⟩ into `share`.
    pub const SHARE_ADDOBJ: u64 = 9;
    /// `share_delobj(ref_share, ref_obj)`: takes the object out of `ref_share`.
    pub const SHARE_DELOBJ: u64 = 10;
    /// `self_drop(share)`: removes `share` from the caller's share set.
    pub const SELF_DROP: u64 = 11;
    /// `obj_get_name(ref_share, ref_obj)`: the object's kind (see [`crate::ObjectKind`]).
    pub const OBJ_GET_NAME: u64 = 12;
    /// `segment_alloc(share, nbytes)`: a new segment of zero-filled pages (filled on first
    /// touch) from this core's memory, placed in `share`; returns its id.
    pub const SEGMENT_ALLOC: u64 = 13;
    /// `segment_get_nbytes(ref_share, ref_obj)`: the segment's size in bytes.
    pub const SEGMENT_GET_NBYTES: u64 = 14;
    /// `segment_set_nbytes(ref_share, ref_obj, nbytes)`: grows or shrinks the segment.
    pub const SEGMENT_SET_NBYTES: u64 = 15;
    /// `ar_alloc(share)`: a new, empty address range placed in `share`; returns its id.
    pub const AR_ALLOC: u64 = 16;
    /// `ar_set_seg(&ArSetSeg)`: maps pages of a segment into an address range.
    pub const AR_SET_SEG: u64 = 17;
    /// `ar_set_ar(&ArSetAr)`: splices an address range into another (1 GiB slots).
    pub const AR_SET_AR: u64 = 18;
    /// `ar_get(ref_share, ref_obj, va)`: the target id mapped at `va` (0 if none).
    pub const AR_GET: u64 = 19;
    /// `page_faults()`: soft page faults the caller's program has taken so far.
    pub const PAGE_FAULTS: u64 = 20;
    /// `locality_get(core, &mut Locality)`: where `core` sits and what it costs to reach
    /// from the caller's core, from the system knowledge base (Corey §4.4, Multikernel §4.9).
    pub const LOCALITY_GET: u64 = 21;
    /// `segment_copy(share, ref_share, ref_obj)`: a new segment holding a copy of the
    /// segment's pages (plain copy; copy-on-write comes with `cfork`), placed in `share`.
    pub const SEGMENT_COPY: u64 = 22;
}

/// What `locality_get` reports about a core (six little-endian words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Locality {
    /// Package (socket).
    pub package: u64,
    /// Core within the package.
    pub core: u64,
    /// Hardware thread within the core.
    pub smt: u64,
    /// NUMA node (its memid's node).
    pub node: u64,
    /// Measured one-way message latency from the caller's core, in cycles (0: itself or
    /// unmeasured).
    pub latency_cycles: u64,
    /// Measured compute speed (work units per millisecond; 0 if unmeasured).
    pub compute_speed: u64,
}

impl Locality {
    /// The words as they sit in memory.
    pub fn to_words(&self) -> [u64; 6] {
        [self.package, self.core, self.smt, self.node, self.latency_cycles, self.compute_speed]
    }

    /// From the words in memory.
    pub fn from_words(w: [u64; 6]) -> Self {
        Locality {
            package: w[0],
            core: w[1],
            smt: w[2],
            node: w[3],
            latency_cycles: w[4],
            compute_speed: w[5],
        }
    }
}

/// The five kinds of Corey kernel objects (Corey §4, Figure 5), as `obj_get_name` reports
/// them. The one definition: the kernel's object model (`crates/objects`) uses it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ObjectKind {
    /// A lookup table of object ids (Corey §3.3).
    Share = 1,
    /// Physical memory pages (Corey §4.3).
    Segment = 2,
    /// A table of address mappings, a page-table subtree (Corey §3.1, §4.3).
    AddressRange = 3,
    /// A physical core (Corey §4.4).
    Pcore = 4,
    /// A hardware or syscall device (Corey §3.2, §4.4).
    Device = 5,
}

impl ObjectKind {
    /// The kind with ABI code `code`, if it is one.
    pub const fn from_code(code: u8) -> Option<ObjectKind> {
        Some(match code {
            1 => ObjectKind::Share,
            2 => ObjectKind::Segment,
            3 => ObjectKind::AddressRange,
            4 => ObjectKind::Pcore,
            5 => ObjectKind::Device,
            _ => return None,
        })
    }
}

/// Mapping flags for `ar_set_seg` / `ar_set_ar`.
pub mod map {
    /// Writable.
    pub const WRITE: u64 = 1;
    /// Executable.
    pub const EXEC: u64 = 2;
    /// Copy-on-write (segment mappings).
    pub const COW: u64 = 4;
}

/// Arguments of `ar_set_seg`, read from user memory (eight little-endian words):
/// `[ar_share, ar_obj, va, seg_share, seg_obj, first_page, pages, flags]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ArSetSeg {
    /// The address range, as ⟨share, object⟩.
    pub ar: [u64; 2],
    /// Where in the range (page-aligned).
    pub va: u64,
    /// The segment, as ⟨share, object⟩.
    pub seg: [u64; 2],
    /// First page of the segment to map.
    pub first_page: u64,
    /// Number of pages.
    pub pages: u64,
    /// [`map`] flags.
    pub flags: u64,
}

/// Arguments of `ar_set_ar`: `[ar_share, ar_obj, va, child_share, child_obj, flags]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ArSetAr {
    /// The parent range.
    pub ar: [u64; 2],
    /// The 1 GiB-aligned slot.
    pub va: u64,
    /// The range to splice in.
    pub child: [u64; 2],
    /// [`map`] flags.
    pub flags: u64,
}

impl ArSetSeg {
    /// The words as they sit in memory.
    pub fn to_words(&self) -> [u64; 8] {
        [
            self.ar[0],
            self.ar[1],
            self.va,
            self.seg[0],
            self.seg[1],
            self.first_page,
            self.pages,
            self.flags,
        ]
    }

    /// From the words in memory.
    pub fn from_words(w: [u64; 8]) -> Self {
        ArSetSeg {
            ar: [w[0], w[1]],
            va: w[2],
            seg: [w[3], w[4]],
            first_page: w[5],
            pages: w[6],
            flags: w[7],
        }
    }
}

impl ArSetAr {
    /// The words as they sit in memory.
    pub fn to_words(&self) -> [u64; 6] {
        [self.ar[0], self.ar[1], self.va, self.child[0], self.child[1], self.flags]
    }

    /// From the words in memory.
    pub fn from_words(w: [u64; 6]) -> Self {
        ArSetAr { ar: [w[0], w[1]], va: w[2], child: [w[3], w[4]], flags: w[5] }
    }
}

/// Why a call failed. The discriminants are the ABI (negated in `rax`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i64)]
pub enum Error {
    /// No such system call.
    NoSuchCall = 1,
    /// A pointer or length does not name memory the caller may use that way.
    BadAddress = 2,
    /// An argument is out of range.
    InvalidArgument = 3,
    /// An object id names nothing the caller can reach.
    NoSuchObject = 4,
    /// Out of memory or another resource.
    NoResources = 5,
    /// The caller may not do this.
    NotPermitted = 6,
}

impl Error {
    /// The error for a raw code, if it is one.
    pub const fn from_code(code: i64) -> Option<Error> {
        Some(match code {
            1 => Error::NoSuchCall,
            2 => Error::BadAddress,
            3 => Error::InvalidArgument,
            4 => Error::NoSuchObject,
            5 => Error::NoResources,
            6 => Error::NotPermitted,
            _ => return None,
        })
    }
}

/// A call's result as the kernel returns it.
pub type SysResult = Result<u64, Error>;

/// Encodes a result into the `rax` word.
pub const fn encode(result: SysResult) -> u64 {
    match result {
        Ok(v) => v,
        Err(e) => (-(e as i64)) as u64,
    }
}

/// Decodes the `rax` word. Values in the top 4096 are errors (like Linux); unknown error
/// codes decode as `InvalidArgument` rather than being mistaken for successes.
pub const fn decode(word: u64) -> SysResult {
    let signed = word as i64;
    if signed < 0 && signed >= -4096 {
        match Error::from_code(-signed) {
            Some(e) => Err(e),
            None => Err(Error::InvalidArgument),
        }
    } else {
        Ok(word)
    }
}

/// Lowest address user programs are linked at.
pub const USER_BASE: u64 = 0x40_0000;
/// End (exclusive) of the user half of the address space.
pub const USER_END: u64 = 0x0000_8000_0000_0000;
/// Top of the initial user stack.
pub const USER_STACK_TOP: u64 = 0x0000_7fff_ffff_0000;
/// Size of the initial user stack.
pub const USER_STACK_BYTES: u64 = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip() {
        for r in [Ok(0), Ok(42), Ok(u64::MAX / 2), Err(Error::BadAddress), Err(Error::NotPermitted)]
        {
            assert_eq!(decode(encode(r)), r);
        }
        for code in 1..=6 {
            let e = Error::from_code(code).unwrap();
            assert_eq!(decode(encode(Err(e))), Err(e));
        }
    }

    #[test]
    fn argument_blocks_round_trip() {
        let a = ArSetSeg { ar: [1, 2], va: 3, seg: [4, 5], first_page: 6, pages: 7, flags: 8 };
        assert_eq!(ArSetSeg::from_words(a.to_words()), a);
        let b = ArSetAr { ar: [1, 2], va: 1 << 30, child: [4, 5], flags: map::WRITE };
        assert_eq!(ArSetAr::from_words(b.to_words()), b);
    }

    #[test]
    fn unknown_negative_codes_are_errors() {
        assert_eq!(decode((-99i64) as u64), Err(Error::InvalidArgument));
        assert_eq!(decode((-5000i64) as u64), Ok((-5000i64) as u64));
    }
}
