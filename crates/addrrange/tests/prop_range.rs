//! Property test of one `AddressRange` against the page-granular model (tests/model):
//! after every random `set_seg` / `set_ar` / `unmap`, the result (removed pieces or error)
//! is what the model predicts, mappings stay sorted, disjoint and inside the span, `get`
//! agrees with the model on every page, and the target counts (`maps`, `targets`,
//! `released`) follow the model's set of mapped objects.

mod model;

use addrrange::AddressRange;
use model::{apply, check, check_removed, op, Model, P};
use proptest::prelude::*;
use std::collections::BTreeSet;

const SPAN: u64 = 48;
const GRAN: u64 = 4;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn range_matches_page_model(ops in proptest::collection::vec(op(SPAN, GRAN, 1..6, 10..13), 1..80)) {
        let mut ar = AddressRange::new(SPAN * P, GRAN * P).unwrap();
        let mut m = Model::new(SPAN, GRAN);
        for op in &ops {
            let before = ar.clone();
            let want = m.apply(op);
            let got = apply(&mut ar, op);
            match (&got, &want) {
                (Ok(removed), Ok(cells)) => {
                    check_removed(removed, cells);
                    let gone: BTreeSet<u64> = cells.values().map(|c| c.id()).collect();
                    let released: Vec<u64> = gone.difference(&m.ids()).copied().collect();
                    prop_assert_eq!(ar.released(removed), released);
                }
                (Err(e), Err(w)) => {
                    prop_assert_eq!(e, w);
                    prop_assert_eq!(&ar, &before);
                }
                _ => prop_assert!(false, "{:?}: got {:?}, model says {:?}", op, got, want),
            }
            check(&ar, &m);
        }
    }
}
