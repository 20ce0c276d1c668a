//! Property tests: random texts (small alphabets with every kind of whitespace, lower
//! case, binary bytes, long words) and random configurations give the reference's output.

mod common;

use common::*;
use metis::{CellKind, Config};
use proptest::prelude::*;

fn texts() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => prop::sample::select(b"abcABC".to_vec()),
        2 => prop::sample::select(b" \n\r\t\0".to_vec()),
        1 => any::<u8>(),
    ];
    prop::collection::vec(byte, 0..3000)
}

fn configs() -> impl Strategy<Value = Config> {
    (1usize..6, 1usize..20, 0usize..=100, prop::option::of(1usize..40), any::<bool>()).prop_map(
        |(threads, tasks, sample, reduce, tree)| Config {
            tasks_per_thread: tasks,
            sample_percent: sample,
            reduce_tasks: reduce,
            cell: if tree { CellKind::BTree } else { CellKind::SortedArray },
            ..Config::new(threads)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_text_any_config_matches_the_reference(input in texts(), config in configs()) {
        let want = (wc_checksum(&input), wri_checksum(&input));
        prop_assert_eq!(metis_checksums(input, config), Ok(want));
    }

    #[test]
    fn long_words_are_cut_alike(len in 1000usize..3000, at in 0usize..3000) {
        let mut input = vec![b'z'; len];
        input.insert(at.min(len), b' ');
        let want = (wc_checksum(&input), wri_checksum(&input));
        prop_assert_eq!(metis_checksums(input, Config::new(2)), Ok(want));
    }
}
