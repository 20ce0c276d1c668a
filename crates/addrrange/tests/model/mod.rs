//! A page-granular model of an address range for the property tests: a map from page
//! number to what that page maps to, edited page by page, plus the checks that an
//! `AddressRange` says exactly what the model says.

// Each test file uses part of the helpers.
#![allow(dead_code)]

use addrrange::{AddressRange, ArError, Mapping, Perms, Target, PAGE_SIZE};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

pub const P: u64 = PAGE_SIZE;

/// What one page maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    Seg {
        seg: u64,
        page: u64,
        cow: bool,
        perms: Perms,
    },
    /// Page of a nested range whose slot starts at page `slot`.
    Range {
        ar: u64,
        slot: u64,
        perms: Perms,
    },
}

impl Cell {
    pub fn id(&self) -> u64 {
        match *self {
            Cell::Seg { seg, .. } => seg,
            Cell::Range { ar, .. } => ar,
        }
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    SetSeg { va: u64, seg: u64, first_page: u64, pages: u64, perms: Perms, cow: bool },
    SetAr { va: u64, ar: u64, perms: Perms },
    Unmap { va: u64, pages: u64 },
}

fn perms() -> impl Strategy<Value = Perms> {
    (any::<bool>(), any::<bool>()).prop_map(|(write, exec)| Perms { write, exec })
}

/// Mostly page-aligned addresses in and just past the span; some unaligned or huge.
fn va(span_pages: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        12 => (0..span_pages).prop_map(|p| p * P),
        1 => (span_pages..span_pages + 4).prop_map(|p| p * P),
        1 => 0..(span_pages + 4) * P,
        1 => (0..4u64).prop_map(|k| u64::MAX - k * P - (P - 1)),
    ]
}

/// Edits of a range of `span_pages` pages with slots of `gran_pages` pages, naming
/// segments `segs` and nested ranges `ars`.
pub fn op(
    span_pages: u64,
    gran_pages: u64,
    segs: std::ops::Range<u64>,
    ars: std::ops::Range<u64>,
) -> impl Strategy<Value = Op> {
    let pages = prop_oneof![12 => 0..12u64, 1 => Just(u64::MAX / P + 1)];
    let first = prop_oneof![8 => 0..64u64, 1 => (0..4u64).prop_map(|k| u64::MAX - k)];
    let slot = prop_oneof![
        6 => (0..span_pages / gran_pages + 1).prop_map(move |s| s * gran_pages * P),
        1 => va(span_pages),
    ];
    prop_oneof![
        5 => (va(span_pages), segs, first, pages.clone(), perms(), any::<bool>()).prop_map(
            |(va, seg, first_page, pages, perms, cow)| Op::SetSeg { va, seg, first_page, pages, perms, cow }
        ),
        2 => (slot, ars, perms()).prop_map(|(va, ar, perms)| Op::SetAr { va, ar, perms }),
        3 => (va(span_pages), pages).prop_map(|(va, pages)| Op::Unmap { va, pages }),
    ]
}

/// The pages a mapping covers, each with what it maps to.
pub fn expand(m: &Mapping) -> Vec<(u64, Cell)> {
    let first = m.start / P;
    (0..m.pages)
        .map(|i| {
            let cell = match m.target {
                Target::Segment { seg, first_page, cow } => {
                    Cell::Seg { seg, page: first_page + i, cow, perms: m.perms }
                }
                Target::Range { ar } => Cell::Range { ar, slot: first, perms: m.perms },
            };
            (first + i, cell)
        })
        .collect()
}

pub fn apply(ar: &mut AddressRange, op: &Op) -> Result<Vec<Mapping>, ArError> {
    match *op {
        Op::SetSeg { va, seg, first_page, pages, perms, cow } => {
            ar.set_seg(va, seg, first_page, pages, perms, cow)
        }
        Op::SetAr { va, ar: id, perms } => ar.set_ar(va, id, perms),
        Op::Unmap { va, pages } => ar.unmap(va, pages),
    }
}

#[derive(Clone, Debug)]
pub struct Model {
    pub span_pages: u64,
    pub gran_pages: u64,
    pub cells: BTreeMap<u64, Cell>,
}

impl Model {
    pub fn new(span_pages: u64, gran_pages: u64) -> Model {
        Model { span_pages, gran_pages, cells: BTreeMap::new() }
    }

    /// The distinct objects mapped.
    pub fn ids(&self) -> BTreeSet<u64> {
        self.cells.values().map(|c| c.id()).collect()
    }

    /// Checks a run of `pages` pages at `va`; returns its page numbers `[first, end)`.
    fn run(&self, va: u64, pages: u64) -> Result<(u64, u64), ArError> {
        if !va.is_multiple_of(P) {
            return Err(ArError::Unaligned);
        }
        if pages == 0 {
            return Err(ArError::Empty);
        }
        let (first, end) = (va / P, (va / P).checked_add(pages).ok_or(ArError::OutOfSpan)?);
        if end > self.span_pages || pages.checked_mul(P).is_none() {
            return Err(ArError::OutOfSpan);
        }
        Ok((first, end))
    }

    fn splits(&self, first: u64, end: u64) -> Result<(), ArError> {
        for p in first..end {
            if let Some(Cell::Range { slot, .. }) = self.cells.get(&p) {
                if *slot < first || slot + self.gran_pages > end {
                    return Err(ArError::SplitsRange);
                }
            }
        }
        Ok(())
    }

    fn clear(&mut self, first: u64, end: u64) -> BTreeMap<u64, Cell> {
        (first..end).filter_map(|p| self.cells.remove(&p).map(|c| (p, c))).collect()
    }

    /// What the edit must do: the cells it removes, or its error (and no change).
    pub fn apply(&mut self, op: &Op) -> Result<BTreeMap<u64, Cell>, ArError> {
        match *op {
            Op::SetSeg { va, seg, first_page, pages, perms, cow } => {
                let (first, end) = self.run(va, pages)?;
                if first_page.checked_add(pages).is_none() {
                    return Err(ArError::SegmentOverflow);
                }
                self.splits(first, end)?;
                let removed = self.clear(first, end);
                for (i, p) in (first..end).enumerate() {
                    let page = first_page + i as u64;
                    self.cells.insert(p, Cell::Seg { seg, page, cow, perms });
                }
                Ok(removed)
            }
            Op::SetAr { va, ar, perms } => {
                if !va.is_multiple_of(self.gran_pages * P) {
                    return Err(ArError::Unaligned);
                }
                let (first, end) = (va / P, va / P + self.gran_pages);
                if end > self.span_pages {
                    return Err(ArError::OutOfSpan);
                }
                let removed = self.clear(first, end);
                for p in first..end {
                    self.cells.insert(p, Cell::Range { ar, slot: first, perms });
                }
                Ok(removed)
            }
            Op::Unmap { va, pages } => {
                let (first, end) = self.run(va, pages)?;
                self.splits(first, end)?;
                Ok(self.clear(first, end))
            }
        }
    }
}

/// Checks that removed mappings are in order, disjoint, and cover exactly `want`.
pub fn check_removed(removed: &[Mapping], want: &BTreeMap<u64, Cell>) {
    for w in removed.windows(2) {
        assert!(w[0].end() <= w[1].start, "removed out of order: {removed:?}");
    }
    let got: BTreeMap<u64, Cell> = removed.iter().flat_map(expand).collect();
    assert_eq!(&got, want);
}

/// Checks the range's invariants and that it maps exactly what the model does.
pub fn check(ar: &AddressRange, model: &Model) {
    let maps: Vec<Mapping> = ar.mappings().copied().collect();
    for m in &maps {
        assert!(m.pages > 0 && m.start % P == 0 && m.end() <= ar.span(), "{m:?}");
        if let Target::Range { .. } = m.target {
            assert!(m.start % ar.granularity() == 0 && m.pages * P == ar.granularity());
        }
    }
    for w in maps.windows(2) {
        assert!(w[0].end() <= w[1].start, "overlap or disorder: {w:?}");
    }
    let cells: BTreeMap<u64, Cell> = maps.iter().flat_map(expand).collect();
    assert_eq!(cells, model.cells);
    assert_eq!(ar.targets().collect::<BTreeSet<_>>(), model.ids());
    for p in 0..model.span_pages + 2 {
        for byte in [0, P / 2 + 3, P - 1] {
            let got = ar.get(p * P + byte).map(|m| {
                assert!(m.contains(p * P + byte));
                expand(m)[((p * P - m.start) / P) as usize].1
            });
            assert_eq!(got, model.cells.get(&p).copied(), "get of page {p}");
        }
    }
}
