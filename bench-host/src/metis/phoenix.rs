//! metis_phoenix: the Phoenix applications on Metis (histogram, linear regression, string
//! match, matrix multiply, k-means), hosted on McRT's pinned processors: seconds per
//! application (k-means: all its iterations), one record each, `config` the application.
//! No peer: these are the suite Atoll and the Linux guest will run with the same code.

use metis::apps::{hist, kmeans, linreg, matmul, strmatch};
use metis::text::{self, Word};
use metis::Config;
use record::{Cores, Fixed2, Record};

/// Input sizes: (pixels, points, text MiB, matrix side, k-means points).
fn sizes(quick: bool) -> (usize, usize, usize, usize, usize) {
    if quick {
        (30_000, 30_000, 1, 40, 5_000)
    } else {
        (16 << 20, 32 << 20, 64, 400, 200_000)
    }
}

/// Runs every application at `threads` workers; the RESULT lines.
pub fn run(threads: usize, quick: bool) -> Result<Vec<String>, String> {
    let (pixels, points, mb, side, kpoints) = sizes(quick);
    let secs = metis::hosted::run(threads, metis::hosted::Placement::Pinned, move || {
        let config = Config { clock: Some(metis::hosted::clock), ..Config::new(threads) };
        let seconds = |ns: u64| ns as f64 / 1e9;
        let mut out: Vec<(&'static str, f64, String)> = Vec::new();

        let px = hist::image(pixels, 1);
        let r = metis::run(&hist::Hist { pixels: &px }, &config).map_err(|e| e.to_string())?;
        out.push(("hist", seconds(r.stats.total_ns), format!("{} values", r.pairs.len())));

        let pts = linreg::points(points, 2);
        let r = metis::run(&linreg::LinReg { points: &pts }, &config).map_err(|e| e.to_string())?;
        let mut sums = [0u64; 5];
        for (k, v) in &r.pairs {
            sums[*k as usize] = *v;
        }
        let (a, b) = linreg::fit(&sums, points);
        out.push(("linreg", seconds(r.stats.total_ns), format!("y = {a:.3} + {b:.3} x")));

        let input = text::wrmem(mb);
        let keys: Vec<Word> =
            [&b"ABC"[..], b"QRS", b"XYZ", b"NOT"].into_iter().map(Word::new).collect();
        let r = metis::run(&strmatch::StrMatch { input: &input, keys }, &config)
            .map_err(|e| e.to_string())?;
        out.push(("strmatch", seconds(r.stats.total_ns), format!("{:?}", r.pairs)));

        let (a, b) = (matmul::matrix(side, 3), matmul::matrix(side, 4));
        let r = metis::run(&matmul::MatMul { n: side, a: &a, b: &b }, &config)
            .map_err(|e| e.to_string())?;
        let trace: i64 = r.pairs.iter().map(|(i, row)| row[*i as usize]).sum();
        out.push(("matmul", seconds(r.stats.total_ns), format!("{side}x{side}, trace {trace}")));

        let kp = kmeans::points(kpoints, 5);
        let start = metis::hosted::clock();
        let (means, iterations) =
            kmeans::kmeans(&kp, 16, 30, &config).map_err(|e| e.to_string())?;
        let ns = metis::hosted::clock() - start;
        out.push((
            "kmeans",
            seconds(ns),
            format!("{} means, {iterations} iterations", means.len()),
        ));
        Ok::<_, String>(out)
    })
    .map_err(|e| e.to_string())??;
    let mut lines = Vec::new();
    for (app, s, note) in secs {
        eprintln!("metis_phoenix {app} ({threads} threads): {s:.3} s; {note}");
        let rec = Record::new("metis_phoenix", "host", Cores::Active(threads), "total_s", "s")
            .config(app)
            .extra(",\"impl\":\"metis\"");
        lines.push(rec.line(Fixed2(s)).to_string());
    }
    Ok(lines)
}
