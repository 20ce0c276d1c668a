//! Property test of `resolve` and `reaches` over several ranges edited at random (nested
//! ranges may name each other, themselves, or ids that do not exist): for every root and
//! every page, `resolve` agrees with a walk of the page-granular models, including the
//! offset arithmetic, the intersected rights, the path, cycles and unknown ranges.

mod model;

use addrrange::{reaches, resolve, AddressRange, ArError, Perms, MAX_DEPTH};
use model::{apply, op, Cell, Model, Op, P};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Ranges 1..=3 span 16 pages with 4-page slots; range 4 spans 2 pages with 1-page slots
/// (so a slot of 1..=3 holding it ends early); id 5 is never made.
const SHAPES: [(u64, u64); 4] = [(16, 4), (16, 4), (16, 4), (2, 1)];

/// What the model walk finds: (segment, page, rights, cow, leaf offset, path).
type Found = (u64, u64, Perms, bool, u64, Vec<u64>);

fn walk(models: &BTreeMap<u64, Model>, root: u64, va: u64) -> Result<Found, ArError> {
    let (mut id, mut offset, mut perms, mut path) = (root, va, Perms::RWX, Vec::new());
    loop {
        if path.contains(&id) {
            return Err(ArError::Cycle);
        }
        if path.len() == MAX_DEPTH {
            return Err(ArError::TooDeep);
        }
        path.push(id);
        let m = models.get(&id).ok_or(ArError::NoSuchRange)?;
        if offset >= m.span_pages * P {
            return Err(ArError::OutOfSpan);
        }
        match m.cells.get(&(offset / P)).ok_or(ArError::NotMapped)? {
            Cell::Seg { seg, page, cow, perms: p } => {
                return Ok((*seg, *page, perms.intersect(*p), *cow, offset, path));
            }
            Cell::Range { ar, slot, perms: p } => {
                perms = perms.intersect(*p);
                offset -= slot * P;
                id = *ar;
            }
        }
    }
}

/// Whether `target` is `from` or nested in it, by the models.
fn model_reaches(models: &BTreeMap<u64, Model>, from: u64, target: u64) -> bool {
    let (mut work, mut seen) = (vec![from], Vec::new());
    while let Some(id) = work.pop() {
        if id == target {
            return true;
        }
        if !seen.contains(&id) {
            seen.push(id);
            let cells = models.get(&id).map(|m| m.cells.values().copied().collect::<Vec<_>>());
            for c in cells.unwrap_or_default() {
                if let Cell::Range { ar, .. } = c {
                    work.push(ar);
                }
            }
        }
    }
    false
}

fn edits() -> impl Strategy<Value = Vec<(usize, Op)>> {
    let big = (0..3usize, op(16, 4, 100..103, 1..6));
    let small = (Just(3usize), op(2, 1, 100..103, 1..6));
    proptest::collection::vec(prop_oneof![6 => big, 1 => small], 1..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn resolve_matches_model_walk(edits in edits()) {
        let mut ranges = BTreeMap::new();
        let mut models = BTreeMap::new();
        for (i, &(span, gran)) in SHAPES.iter().enumerate() {
            let id = i as u64 + 1;
            ranges.insert(id, AddressRange::new(span * P, gran * P).unwrap());
            models.insert(id, Model::new(span, gran));
        }
        for (i, op) in &edits {
            let id = *i as u64 + 1;
            let got = apply(ranges.get_mut(&id).unwrap(), op).map(|_| ());
            prop_assert_eq!(got, models.get_mut(&id).unwrap().apply(op).map(|_| ()));
        }
        for root in 1..=5u64 {
            for page in 0..18u64 {
                let va = page * P + (page * 97) % P;
                let want = walk(&models, root, va);
                let got = resolve(root, va, |id| ranges.get(&id)).map(|r| {
                    (r.seg, r.page, r.perms, r.cow, r.offset, r.path.as_slice().to_vec())
                });
                prop_assert_eq!(got, want, "root {} va {:#x}", root, va);
            }
            for target in 1..=5u64 {
                let got = reaches(root, target, |id| ranges.get(&id));
                prop_assert_eq!(got, model_reaches(&models, root, target));
            }
        }
    }
}
