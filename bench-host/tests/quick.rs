//! Runs every measurement with the `--quick` counts, so the benchmark code cannot rot.
//! Only checks that each trial finishes and yields a sane number; timing decides nothing.

use bench_host::{run, Config};

#[test]
fn quick_run_measures_everything() {
    let r = run(Config::QUICK);
    for value in
        [r.urpc_latency, r.floor_latency, r.rtrb_latency, r.urpc_throughput, r.rtrb_throughput]
    {
        assert!(value.is_finite() && value > 0.0, "{r:?}");
    }
    let lines = r.lines();
    assert_eq!(lines.len(), 8);
    for line in &lines {
        assert!(line.starts_with("RESULT {\"experiment\":\""), "{line}");
        assert!(line.contains("\"system\":\"host\",\"cores\":2,"), "{line}");
        assert!(line.contains(",\"pair\":[0,1]"), "{line}");
        assert!(!line.contains("null"), "{line}");
    }
}
