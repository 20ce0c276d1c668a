//! What the fuzzer holds and knows: the pool of objects it made (and the ids of those it
//! deleted), the shares it added to its set, the pcores it held and on which core, its
//! own objects (never destroyed or aliased writable), and the zone of its root range.

use crate::call::{Kind, Made};
use crate::fuzzer::{Fuzzer, GRAVE, MAPPINGS_ALL, PAGE, PCORE_HOLD, POOL, ZONE, ZONE_END};
use crate::{SIBLINGS, WORKERS};
use core::sync::atomic::Ordering;
use libatoll::abi::{map, nr, ArSetSeg, ObjectKind};
use libatoll::obj::{self, share_delobj, ObjRef};
use libatoll::syscall5;

impl Fuzzer {
    /// Remembers an object the kernel made in `share`: in the pool if that is the root
    /// share (deleting the oldest when the pool is full).
    pub fn keep(&mut self, share: u64, id: u64, kind: Kind) {
        if share != self.root || id == 0 {
            return;
        }
        if self.pooled == POOL {
            let oldest = self.pool[0];
            self.forget(oldest.id);
        }
        self.pool[self.pooled] = Made { id, kind, born: self.steps };
        self.pooled += 1;
    }

    /// Deletes `id` from the root share (a share also from the set) and from the pool.
    pub fn forget(&mut self, id: u64) {
        if let Some(i) = self.pool[..self.pooled].iter().position(|m| m.id == id) {
            if self.pool[i].kind == Kind::Share {
                let _ = obj::self_drop(id);
            }
            self.pool.copy_within(i + 1..self.pooled, i);
            self.pooled -= 1;
        }
        let _ = share_delobj(ObjRef::new(self.root, id));
        self.bury(id);
    }

    /// Deletes the pooled pcores held longer than [`PCORE_HOLD`] steps: each core has one
    /// pcore object, and the fuzzers on other cores want theirs too.
    pub fn release_pcores(&mut self) {
        let now = self.steps;
        let old = |m: &&Made| m.kind == Kind::Pcore && m.born + PCORE_HOLD < now;
        while let Some(m) = self.pool[..self.pooled].iter().find(old).copied() {
            self.forget(m.id);
        }
    }

    /// Takes `id` out of the pool without deleting it (something else now keeps it).
    pub fn unpool(&mut self, id: u64) {
        if let Some(i) = self.pool[..self.pooled].iter().position(|m| m.id == id) {
            self.pool.copy_within(i + 1..self.pooled, i);
            self.pooled -= 1;
        }
    }

    /// Remembers a deleted id, to pass back as a stale reference.
    pub fn bury(&mut self, id: u64) {
        self.grave[self.graves % GRAVE] = id;
        self.graves += 1;
    }

    /// Deletes the pool and takes the shares it added out of its set, so what those held
    /// goes too; resets the zone.
    pub fn purge(&mut self) {
        while self.pooled > 0 {
            let id = self.pool[self.pooled - 1].id;
            self.forget(id);
        }
        for &share in &self.in_set[..self.in_sets] {
            let _ = obj::self_drop(share);
        }
        self.in_sets = 0;
        self.zone_reset();
        self.zone_pages = 0;
    }

    /// Maps the empty cover segment over the whole zone: the root range lets go of
    /// everything mapped or spliced there (freed, with its pages, if nothing else holds
    /// it).
    pub fn zone_reset(&mut self) {
        let set = ArSetSeg {
            ar: [self.root, self.root_ar],
            va: ZONE,
            seg: [self.root, self.cover],
            first_page: 0,
            pages: (ZONE_END - ZONE) / PAGE,
            flags: 0,
        };
        let _ = obj::ar_set_seg(&set);
    }

    /// Reads its root range again: what it maps outside the zone is protected (a heap
    /// segment added since is too), and its read-only parts are noted.
    pub fn refresh_protected(&mut self) {
        let mut cap = self.mappings.len() as u64;
        let mut n = 0;
        for _ in 0..3 {
            let ptr = self.mappings.as_mut_ptr() as u64;
            n = syscall5(nr::AR_MAPPINGS, self.root, self.root_ar, ptr, cap, 0).unwrap_or(0);
            if n <= cap {
                break;
            }
            // More mappings than it has room for: every one outside the zone must be read
            // (they come in address order, and its heap and stack are near the end: the
            // 100 M run's seeds 90, 210, 230 and 240 once shrank or revoked a stack or
            // heap segment cut off the list, behind 500 parkers' stack mappings). Room for
            // all, up to a range's cap; past it, the zone is cleared.
            if n <= MAPPINGS_ALL {
                self.mappings.resize(n as usize + 64, [0; 6]);
                cap = self.mappings.len() as u64;
            } else {
                self.zone_reset();
            }
        }
        self.protected.clear();
        self.readonly = [(0, 0); 8];
        self.mapped = n.min(cap) as usize;
        let mut ro = 0;
        for m in &self.mappings[..self.mapped] {
            let (va, pages, target, flags) = (m[0], m[1], m[2], m[4]);
            if (ZONE..ZONE_END).contains(&va) {
                continue;
            }
            if !self.protected.contains(&target) && self.protected.len() < MAPPINGS_ALL as usize {
                self.protected.push(target);
            }
            // Read-only and backed by its segment: the fuzzer reads such memory itself. A
            // read-only mapping past its segment's end is not (libatoll maps an empty
            // segment over memory it gives back: seed 10 of the 100 M run read a failed
            // thread's stack there and faulted).
            let needed = m[3].saturating_add(pages).saturating_mul(PAGE);
            if flags & map::WRITE == 0 && ro < self.readonly.len() && self.backed(target, needed) {
                self.readonly[ro] = (va, va.saturating_add(pages.saturating_mul(PAGE)));
                ro += 1;
            }
        }
        let more = [self.root_ar, self.cover];
        for id in more.into_iter().chain(self.machine) {
            if !self.protected.contains(&id) {
                self.protected.push(id);
            }
        }
    }

    /// Pools the slot ranges spliced into the zone (from the mappings
    /// `refresh_protected` read). The one segment there is the parent's cover: not its to
    /// resize.
    pub fn adopt_zone(&mut self) {
        for i in 0..self.mapped {
            let [va, _, target, _, _, kind] = self.mappings[i];
            if (ZONE..ZONE_END).contains(&va) && kind == ObjectKind::AddressRange as u64 {
                self.keep(self.root, target, Kind::Slot);
            }
        }
    }

    /// Whether segment `id` (named through its root or the home share) holds at least
    /// `bytes` bytes.
    fn backed(&self, id: u64, bytes: u64) -> bool {
        self.own_size(id).is_some_and(|size| size >= bytes)
    }

    /// Whether `id` is one of its own objects (its memory, its range, the cover, the
    /// machine device).
    pub fn is_protected(&self, id: u64) -> bool {
        id != 0 && self.protected.contains(&id)
    }

    /// Whether `id` must stay in the root share: protected, or the pcore of something it
    /// started or of a sibling fuzzer.
    pub fn must_keep(&self, id: u64) -> bool {
        self.is_protected(id) || self.started.iter().any(|s| s.pcore == id) || self.is_sibling(id)
    }

    /// Remembers that `id` is the pcore of `core`.
    pub fn note_pcore(&mut self, id: u64, core: u64) {
        if self.pcores.len() < self.pcores.capacity() {
            let at = self.pcores.partition_point(|&(p, _)| p < id);
            if self.pcores.get(at).is_none_or(|&(p, _)| p != id) {
                self.pcores.insert(at, (id, core));
            }
        } else {
            self.pcores_lost = true;
        }
    }

    /// The core of pcore `id`, if it is one it held.
    pub fn pcore_core(&self, id: u64) -> Option<u64> {
        let at = self.pcores.partition_point(|&(p, _)| p < id);
        self.pcores.get(at).filter(|&&(p, _)| p == id).map(|&(_, core)| core)
    }

    /// Whether `id` might name a pcore it can reach.
    pub fn maybe_pcore(&self, id: u64) -> bool {
        self.pcores_lost || self.pcore_core(id).is_some() || self.is_sibling(id)
    }

    /// Whether starting something on pcore `id` is allowed: its own core (a program
    /// there runs while it waits) or one of `--others`. A pcore it does not know is a
    /// sibling's (busy) or nobody's (refused), unless it lost count.
    pub fn may_start_on(&self, id: u64) -> bool {
        match self.pcore_core(id) {
            Some(core) => core == self.me || (core < 64 && self.others & (1 << core) != 0),
            None => !self.pcores_lost,
        }
    }

    /// Whether `id` is the thread object of one of this program's fuzzing threads.
    pub fn is_worker(&self, id: u64) -> bool {
        id != 0 && WORKERS.iter().any(|s| s.load(Ordering::Relaxed) == id)
    }

    /// Whether `id` is the pcore of a fuzzer this program spread to another core.
    pub fn is_sibling(&self, id: u64) -> bool {
        id != 0 && SIBLINGS.iter().any(|s| s.load(Ordering::Relaxed) == id)
    }

    /// Whether `p` lies in one of its read-only mappings (with `len` bytes after it).
    pub fn in_readonly(&self, p: u64, len: u64) -> bool {
        self.readonly.iter().any(|&(start, end)| start <= p && p.saturating_add(len) <= end)
    }

    /// A stale id (of something it deleted), or 0.
    pub fn stale(&mut self) -> u64 {
        match self.graves.min(GRAVE) {
            0 => 0,
            n => self.grave[self.rng.below(n as u64) as usize],
        }
    }

    /// A pooled object of `kind` (any kind for `None`), if there is one.
    pub fn pooled_of(&mut self, kind: Option<Kind>) -> Option<u64> {
        let n =
            self.pool[..self.pooled].iter().filter(|m| kind.is_none_or(|k| m.kind == k)).count();
        if n == 0 {
            return None;
        }
        let pick = self.rng.below(n as u64) as usize;
        self.pool[..self.pooled]
            .iter()
            .filter(|m| kind.is_none_or(|k| m.kind == k))
            .nth(pick)
            .map(|m| m.id)
    }

    /// The kind of pooled object `id`, if it is in the pool.
    pub fn kind_of(&self, id: u64) -> Option<Kind> {
        self.pool[..self.pooled].iter().find(|m| m.id == id).map(|m| m.kind)
    }

    /// A share in its set other than the root share (for `pcore_run`'s list), if any.
    pub fn set_share(&mut self) -> Option<u64> {
        (self.in_sets > 0).then(|| self.in_set[self.rng.below(self.in_sets as u64) as usize])
    }
}
