//! The engine against the sequential references: the same checksum at every core count,
//! cell kind and plan; the bad inputs of issue 24; the Phoenix applications.

mod common;

use common::*;
use metis::apps::{hist, kmeans, linreg, matmul, strmatch, wc::Wc, wri::Wri};
use metis::text::{self, Word};
use metis::{CellKind, Config, Edge, Error, Layout, Phase};

#[test]
fn wc_and_wri_match_the_reference_at_every_core_count_and_cell() {
    let input = text::wrmem(1);
    let want = (wc_checksum(&input), wri_checksum(&input));
    for threads in [1, 2, 3, 4, 7] {
        for cell in CellKind::ALL {
            let config = Config { cell, ..Config::new(threads) };
            assert_eq!(metis_checksums(input.clone(), config), Ok(want), "{threads} {cell:?}");
        }
    }
}

#[test]
fn wc_counts_every_word_of_wrmem_and_sorts_by_count() {
    let out = on_mcrt(2, || {
        let input = text::wrmem(2);
        let config = Config { clock: Some(metis::hosted::clock), ..Config::new(2) };
        let out = metis::run(&Wc { input: &input }, &config).expect("runs");
        let words: u64 = out.pairs.iter().map(|p| p.1).sum();
        let sorted =
            out.pairs.windows(2).all(|w| w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0));
        (words, out.pairs.len(), sorted, out.stats)
    });
    let (words, keys, sorted, stats) = out;
    // 4 bytes a word.
    assert_eq!(words, 2 << 18);
    // Not 26^3: `r % 26` keeps the parity of the LCG's low bit, which alternates, so a
    // word's three letters' parities follow one of two patterns (26^3 / 4 words).
    assert_eq!(keys, 4394);
    assert!(sorted);
    assert_eq!(stats.map_tasks, 32);
    assert_eq!(stats.sampled_tasks, 2); // 5 % of 32 is 1; one per worker
                                        // The two sampled tasks (whichever workers took them) see nearly all 4394 keys; / 10,
                                        // clamped to 200, a prime.
    assert!(stats.predicted_keys > 4000, "{stats:?}");
    assert_eq!(stats.reduce_tasks, 211);
    assert_eq!(stats.pairs, words);
}

#[test]
fn plans_do_not_change_the_output() {
    let input = b"the The tHe a b c  d\td\nd e\0e\r f".repeat(300);
    let want = (wc_checksum(&input), wri_checksum(&input));
    for (tasks, sample, reduce) in
        [(1, 0, None), (3, 100, None), (16, 5, Some(1)), (50, 50, Some(7))]
    {
        let config = Config {
            tasks_per_thread: tasks,
            sample_percent: sample,
            reduce_tasks: reduce,
            ..Config::new(3)
        };
        assert_eq!(metis_checksums(input.clone(), config), Ok(want));
    }
}

#[test]
fn empty_input_gives_an_empty_output() {
    for input in [vec![], b" \n\t\0\r  ".to_vec()] {
        let n = on_mcrt(2, move || {
            metis::run(&Wc { input: &input }, &Config::new(2)).map(|o| o.pairs.len())
        });
        assert_eq!(n, Ok(0));
    }
}

#[test]
fn a_one_megabyte_word_is_one_word_with_a_1024_byte_key() {
    let out = on_mcrt(2, || {
        let mut input = vec![b'q'; 1 << 20];
        input.extend_from_slice(b" q");
        let out = metis::run(&Wri { input: &input }, &Config::new(2)).expect("runs");
        out.pairs.iter().map(|(k, v)| (k.bytes().len(), v.clone())).collect::<Vec<_>>()
    });
    assert_eq!(out, [(1, vec![(1 << 20) + 1]), (text::MAX_KEY, vec![0])]);
}

#[test]
fn binary_bytes_are_words_like_any_other() {
    let mut r = metis::apps::Lcg(9);
    let input: Vec<u8> = (0..200_000).map(|_| (r.next_u31() >> 7) as u8).collect();
    let want = (wc_checksum(&input), wri_checksum(&input));
    assert_eq!(metis_checksums(input, Config::new(2)), Ok(want));
}

#[test]
fn bad_configurations_are_errors() {
    let input = text::wrmem(1);
    for (threads, err) in [(0, Error::NoThreads), (257, Error::TooManyThreads { asked: 257 })] {
        assert_eq!(metis_checksums(input.clone(), Config::new(threads)), Err(err));
    }
    let bad = Config { tasks_per_thread: 0, ..Config::new(2) };
    assert!(matches!(metis_checksums(input.clone(), bad), Err(Error::BadConfig(_))));
    // Outside a runtime: an error, not a hang or a panic.
    let r = metis::run(&Wc { input: &input }, &Config::new(2)).map(|_| ());
    assert_eq!(r.err(), Some(Error::NotInRuntime));
    // More McRT processors than Metis allows.
    assert!(metis::hosted::run(1000, metis::hosted::Placement::Unpinned, || ()).is_err());
}

#[test]
fn many_more_threads_than_processors_still_agree() {
    let input = text::wrmem(1);
    let want = (wc_checksum(&input), wri_checksum(&input));
    assert_eq!(metis_checksums(input, Config::new(64)), Ok(want)); // 64 workers, 4 processors
}

#[test]
fn phoenix_histogram() {
    let px = hist::image(100_003, 1);
    let mut want = vec![0u64; 768];
    for p in px.chunks_exact(3) {
        for c in 0..3 {
            want[c * 256 + p[c] as usize] += 1;
        }
    }
    let got = on_mcrt(3, move || {
        metis::run(&hist::Hist { pixels: &px }, &Config::new(3)).map(|o| o.pairs)
    });
    let want: Vec<(u32, u64)> =
        want.into_iter().enumerate().filter(|p| p.1 > 0).map(|(k, n)| (k as u32, n)).collect();
    assert_eq!(got, Ok(want));
}

#[test]
fn phoenix_linear_regression() {
    let pts = linreg::points(50_001, 2);
    let mut want = [0u64; 5];
    for p in pts.chunks_exact(2) {
        let (x, y) = (p[0] as u64, p[1] as u64);
        want = [want[0] + x, want[1] + y, want[2] + x * x, want[3] + y * y, want[4] + x * y];
    }
    let got = on_mcrt(2, move || {
        metis::run(&linreg::LinReg { points: &pts }, &Config::new(2)).map(|o| o.pairs)
    });
    let sums: Vec<u64> = got.expect("runs").into_iter().map(|p| p.1).collect();
    assert_eq!(sums, want);
    let (a, b) = linreg::fit(&want, 50_001);
    assert!((b - 0.5).abs() < 0.05 && (a - 6.5).abs() < 1.0, "{a} {b}");
}

#[test]
fn phoenix_string_match() {
    let input = text::wrmem(1);
    let idx = index(&input);
    let keys: [&[u8]; 4] = [b"ABC", b"zzz", b"NOPE", b"QRS"];
    let want: Vec<(u32, u64)> = keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| idx.get(&k.to_ascii_uppercase()).map(|p| (i as u32, p.len() as u64)))
        .collect();
    let got = on_mcrt(2, move || {
        let job =
            strmatch::StrMatch { input: &input, keys: keys.iter().map(|k| Word::new(k)).collect() };
        metis::run(&job, &Config::new(2)).map(|o| o.pairs)
    });
    assert_eq!(got, Ok(want));
}

#[test]
fn phoenix_matrix_multiply() {
    let n = 61;
    let (a, b) = (matmul::matrix(n, 3), matmul::matrix(n, 4));
    let mut want = vec![0i64; n * n];
    for i in 0..n {
        for j in 0..n {
            want[i * n + j] = (0..n).map(|k| a[i * n + k] as i64 * b[k * n + j] as i64).sum();
        }
    }
    let got = on_mcrt(2, move || {
        metis::run(&matmul::MatMul { n, a: &a, b: &b }, &Config::new(2)).map(|o| o.pairs)
    });
    let got: Vec<i64> = got.expect("runs").into_iter().flat_map(|p| p.1).collect();
    assert_eq!(got, want);
}

#[test]
fn phoenix_kmeans_agrees_across_core_counts() {
    let pts = kmeans::points(20_000, 5);
    let runs: Vec<_> = [1, 2, 4]
        .into_iter()
        .map(|t| {
            let pts = pts.clone();
            on_mcrt(t, move || kmeans::kmeans(&pts, 8, 50, &Config::new(t)).expect("runs"))
        })
        .collect();
    assert!(runs.windows(2).all(|w| w[0] == w[1]));
    let (means, iterations) = &runs[0];
    assert_eq!(means.len(), 8);
    assert!(*iterations > 1 && *iterations <= 50);
}

/// Records every hook call.
#[derive(Default)]
struct Recorder {
    calls: std::sync::Mutex<Vec<(Phase, Option<usize>, Edge)>>,
}

impl Layout for Recorder {
    fn phase(&self, phase: Phase, edge: Edge) {
        self.calls.lock().unwrap().push((phase, None, edge));
    }

    fn worker(&self, phase: Phase, worker: usize, edge: Edge) {
        self.calls.lock().unwrap().push((phase, Some(worker), edge));
    }
}

#[test]
fn the_layout_hook_brackets_every_phase_and_every_worker() {
    let calls = on_mcrt(3, || {
        let input = text::wrmem(1);
        let rec = Recorder::default();
        metis::run_with(&Wri { input: &input }, &Config::new(3), &rec).expect("runs");
        rec.calls.into_inner().unwrap()
    });
    // The coordinator's calls: each phase begins and ends, in order.
    let coordinator: Vec<_> = calls.iter().filter(|c| c.1.is_none()).map(|c| (c.0, c.2)).collect();
    let want: Vec<_> =
        Phase::ALL.iter().flat_map(|&p| [(p, Edge::Begin), (p, Edge::End)]).collect();
    assert_eq!(coordinator, want);
    // Inside each phase's bracket, every worker begins once and ends once (the merge phase
    // runs three regions, so three brackets per worker there).
    for phase in Phase::ALL {
        let begin = calls.iter().position(|c| *c == (phase, None, Edge::Begin)).unwrap();
        let end = calls.iter().position(|c| *c == (phase, None, Edge::End)).unwrap();
        let regions = if phase == Phase::Merge { 3 } else { 1 };
        for w in 0..3 {
            for edge in [Edge::Begin, Edge::End] {
                let n = calls[begin..end].iter().filter(|c| **c == (phase, Some(w), edge)).count();
                assert_eq!(n, regions, "{phase:?} worker {w} {edge:?}: {calls:?}");
            }
        }
    }
}
