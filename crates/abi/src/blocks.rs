//! The argument blocks: what calls read from user memory or write there, several
//! little-endian words each, with their conversions to and from those words. Re-exported
//! at the crate root, so users name them `abi::PcoreRun` and so on.

/// Arguments of `thread_create`, read from user memory (17 little-endian words):
/// `[share, core, entry, stack, ar_share, ar_obj, arg, nshares, shares[8], affinity]`.
/// As `pcore_run`'s: the shares become the thread's share set beside a fresh root share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCreate {
    /// The share that receives the thread object.
    pub share: u64,
    /// The core to start on, or [`ANY_CORE`](crate::ANY_CORE) (the scheduler's placement).
    pub core: u64,
    /// First instruction.
    pub entry: u64,
    /// Initial stack pointer.
    pub stack: u64,
    /// The root address range, as ⟨share, object⟩.
    pub ar: [u64; 2],
    /// Passed to the thread in `rdi`.
    pub arg: u64,
    /// How many of `shares` are used.
    pub nshares: u64,
    /// Shares (ids in the caller's share set) for the thread's share set.
    pub shares: [u64; 8],
    /// The cores it may run on (bit i: core i; 0: every core).
    pub affinity: u64,
}

impl ThreadCreate {
    /// Words in memory.
    pub const WORDS: usize = 17;

    /// The words as they sit in memory: `pcore_run`'s block, with ⟨share, core⟩ where
    /// that block has the pcore, and the affinity where it has its flags.
    pub fn to_words(&self) -> [u64; 17] {
        let run = PcoreRun {
            pcore: [self.share, self.core],
            entry: self.entry,
            stack: self.stack,
            ar: self.ar,
            arg: self.arg,
            nshares: self.nshares,
            shares: self.shares,
            flags: self.affinity,
        };
        run.to_words()
    }

    /// Reads the words.
    pub fn from_words(w: [u64; 17]) -> ThreadCreate {
        let run = PcoreRun::from_words(w);
        ThreadCreate {
            share: run.pcore[0],
            core: run.pcore[1],
            entry: run.entry,
            stack: run.stack,
            ar: run.ar,
            arg: run.arg,
            nshares: run.nshares,
            shares: run.shares,
            affinity: run.flags,
        }
    }
}

/// What `thread_stat` writes (5 words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadStat {
    /// Its [`pcore_status`](crate::pcore_status) word.
    pub status: u64,
    /// The core it is on (or last ran on).
    pub core: u64,
    /// Times it moved to another core (not counting where it was first placed).
    pub migrations: u64,
    /// Times it was switched onto a core.
    pub switches: u64,
    /// Pages it faulted in that are still resident, on all nodes (AMPS §3.3's counters).
    pub resident_pages: u64,
}

impl ThreadStat {
    /// The words as they sit in memory.
    pub fn to_words(&self) -> [u64; 5] {
        [self.status, self.core, self.migrations, self.switches, self.resident_pages]
    }

    /// Reads the words.
    pub fn from_words(w: [u64; 5]) -> ThreadStat {
        ThreadStat {
            status: w[0],
            core: w[1],
            migrations: w[2],
            switches: w[3],
            resident_pages: w[4],
        }
    }
}

/// Arguments of `pcore_run`, read from user memory (17 little-endian words):
/// `[pcore_share, pcore_obj, entry, stack, ar_share, ar_obj, arg, nshares, shares[8], flags]`.
/// The shares (at most [`PcoreRun::MAX_SHARES`]) must be in the caller's share set; they
/// become the new context's share set beside a fresh, empty root share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcoreRun {
    /// The pcore, as ⟨share, object⟩.
    pub pcore: [u64; 2],
    /// First instruction.
    pub entry: u64,
    /// Initial stack pointer.
    pub stack: u64,
    /// The root address range, as ⟨share, object⟩.
    pub ar: [u64; 2],
    /// Passed to the context in `rdi`.
    pub arg: u64,
    /// How many of `shares` are used.
    pub nshares: u64,
    /// Shares (ids in the caller's share set) for the new context's share set.
    pub shares: [u64; 8],
    /// Options: [`PcoreRun::KERNEL_CORE`] (then every field but `pcore` must be 0).
    pub flags: u64,
}

impl PcoreRun {
    /// Most shares a context can be given.
    pub const MAX_SHARES: usize = 8;
    /// Words in memory.
    pub const WORDS: usize = 17;
    /// `flags`: the pcore becomes a kernel core (Corey §4.4), polling the devices
    /// `pcore_add_device` gave it, instead of running a user context.
    pub const KERNEL_CORE: u64 = 1;

    /// The words as they sit in memory.
    pub fn to_words(&self) -> [u64; 17] {
        let mut w = [0u64; 17];
        w[..8].copy_from_slice(&[
            self.pcore[0],
            self.pcore[1],
            self.entry,
            self.stack,
            self.ar[0],
            self.ar[1],
            self.arg,
            self.nshares,
        ]);
        w[8..16].copy_from_slice(&self.shares);
        w[16] = self.flags;
        w
    }

    /// From the words in memory.
    pub fn from_words(w: [u64; 17]) -> Self {
        let mut shares = [0u64; 8];
        shares.copy_from_slice(&w[8..16]);
        PcoreRun {
            pcore: [w[0], w[1]],
            entry: w[2],
            stack: w[3],
            ar: [w[4], w[5]],
            arg: w[6],
            nshares: w[7],
            shares,
            flags: w[16],
        }
    }
}

/// One mapping of an address range, as `ar_mappings` writes it (six words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MappingInfo {
    /// Offset in the range (a virtual address for a root range).
    pub va: u64,
    /// Length in pages.
    pub pages: u64,
    /// The segment's or nested range's id.
    pub target: u64,
    /// First page of the segment (0 for a range).
    pub first_page: u64,
    /// [`map`](crate::map) flags.
    pub flags: u64,
    /// [`ObjectKind`](crate::ObjectKind) code of the target (segment or address range).
    pub kind: u64,
}

impl MappingInfo {
    /// The words as they sit in memory.
    pub fn to_words(&self) -> [u64; 6] {
        [self.va, self.pages, self.target, self.first_page, self.flags, self.kind]
    }

    /// From the words in memory.
    pub fn from_words(w: [u64; 6]) -> Self {
        MappingInfo {
            va: w[0],
            pages: w[1],
            target: w[2],
            first_page: w[3],
            flags: w[4],
            kind: w[5],
        }
    }
}

/// One device as `device_list` writes it (four words; `name` is up to 8 ASCII bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The hardware id `device_alloc` takes.
    pub hwid: u64,
    /// A [`device_kind`](crate::device_kind) code.
    pub kind: u64,
    /// The core it belongs to (timers), or `u64::MAX` for the machine's.
    pub core: u64,
    /// A short name, little-endian bytes, zero-padded.
    pub name: u64,
}

/// A device's counters, as `device_stat` writes them (four words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStat {
    /// The hardware id.
    pub hwid: u64,
    /// A [`device_kind`](crate::device_kind) code.
    pub kind: u64,
    /// Bytes (serial, initrd size) or ticks (timer) so far.
    pub count: u64,
    /// Bytes received (serial), files (initrd), frequency in Hz (timer).
    pub detail: u64,
}

/// What `locality_get` reports about a core ([`Locality::WORDS`] little-endian words).
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
    /// Bytes of its last-level cache, from CPUID or measured (0 if unknown; AMPS §2.4.2).
    pub llc_bytes: u64,
}

impl Locality {
    /// Words in memory.
    pub const WORDS: usize = 7;

    /// The words as they sit in memory.
    pub fn to_words(&self) -> [u64; Self::WORDS] {
        [
            self.package,
            self.core,
            self.smt,
            self.node,
            self.latency_cycles,
            self.compute_speed,
            self.llc_bytes,
        ]
    }

    /// From the words in memory.
    pub fn from_words(w: [u64; Self::WORDS]) -> Self {
        Locality {
            package: w[0],
            core: w[1],
            smt: w[2],
            node: w[3],
            latency_cycles: w[4],
            compute_speed: w[5],
            llc_bytes: w[6],
        }
    }
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
    /// [`map`](crate::map) flags.
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
    /// [`map`](crate::map) flags.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{map, ANY_CORE};

    #[test]
    fn argument_blocks_round_trip() {
        let a = ArSetSeg { ar: [1, 2], va: 3, seg: [4, 5], first_page: 6, pages: 7, flags: 8 };
        assert_eq!(ArSetSeg::from_words(a.to_words()), a);
        let b = ArSetAr { ar: [1, 2], va: 1 << 30, child: [4, 5], flags: map::WRITE };
        assert_eq!(ArSetAr::from_words(b.to_words()), b);
        let mut r = PcoreRun {
            pcore: [1, 2],
            entry: 3,
            stack: 4,
            ar: [5, 6],
            arg: 7,
            ..Default::default()
        };
        r.nshares = 2;
        r.shares[..2].copy_from_slice(&[9, 10]);
        r.flags = PcoreRun::KERNEL_CORE;
        assert_eq!(PcoreRun::from_words(r.to_words()), r);
        assert_eq!(r.to_words()[16], PcoreRun::KERNEL_CORE, "flags are the last word");
        let t = ThreadCreate {
            share: 1,
            core: ANY_CORE,
            entry: 3,
            stack: 4,
            ar: [5, 6],
            arg: 7,
            nshares: 1,
            shares: [8, 0, 0, 0, 0, 0, 0, 9],
            affinity: 0b101,
        };
        assert_eq!(ThreadCreate::from_words(t.to_words()), t);
        let st = ThreadStat { status: 1, core: 2, migrations: 3, switches: 4, resident_pages: 5 };
        assert_eq!(ThreadStat::from_words(st.to_words()), st);
        let m = MappingInfo { va: 1, pages: 2, target: 3, first_page: 4, flags: 5, kind: 6 };
        assert_eq!(MappingInfo::from_words(m.to_words()), m);
    }
}
