//! Sequential references (a `BTreeMap`) for the engine's tests, and a runner.
#![allow(dead_code)]

use metis::text::{self, Word};
use metis::{Config, Error};

/// Word → positions, by the rules of `metis::text`, sequentially.
pub use metis::reference::index;

/// The `wri` checksum of the reference.
pub fn wri_checksum(input: &[u8]) -> u64 {
    let pairs: Vec<(Word<'_>, Vec<usize>)> =
        index(input).into_iter().map(|(k, v)| (Word::new(&k).into_owned(), v)).collect();
    metis::apps::wri::checksum(&pairs)
}

/// The `wc` output of the reference, in wc's order.
pub fn counts(input: &[u8]) -> Vec<(Vec<u8>, u64)> {
    let mut v: Vec<(Vec<u8>, u64)> =
        index(input).into_iter().map(|(k, p)| (k, p.len() as u64)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// The `wc` checksum of the reference.
pub fn wc_checksum(input: &[u8]) -> u64 {
    let c = counts(input);
    text::checksum(c.iter().map(|(k, n)| (&k[..], *n)))
}

/// Runs `f` on a McRT runtime of `processors` unpinned processors.
pub fn on_mcrt<R: Send + 'static>(processors: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
    metis::hosted::run(processors, metis::hosted::Placement::Unpinned, f).expect("mcrt runs")
}

/// wc and wri checksums of `input` by Metis with `config`.
pub fn metis_checksums(input: Vec<u8>, config: Config) -> Result<(u64, u64), Error> {
    on_mcrt(config.threads.clamp(1, 4), move || {
        let wc = metis::run(&metis::apps::wc::Wc { input: &input }, &config)?;
        let wri = metis::run(&metis::apps::wri::Wri { input: &input }, &config)?;
        Ok((metis::apps::wc::checksum(&wc.pairs), metis::apps::wri::checksum(&wri.pairs)))
    })
}
