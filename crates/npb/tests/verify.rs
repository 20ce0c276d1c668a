//! Every kernel at class S verifies against NPB's values on 1, 2 and 3 McRT workers
//! (hosted, unpinned: more workers than CPUs is fine), and bad requests are refused.

use npb::hosted::{self, Placement};
use npb::{Class, Error, Kernel};

fn run(kernel: Kernel, class: Class, threads: usize, processors: usize) -> npb::Report {
    hosted::run(processors, Placement::Unpinned, move || {
        npb::run(kernel, class, threads, hosted::clock)
    })
    .expect("mcrt runs")
    .expect("the kernel runs")
}

fn verify_s(kernel: Kernel) {
    for threads in [1, 2, 3] {
        let r = run(kernel, Class::S, threads, threads.min(2));
        assert!(r.verified, "{} S on {threads} threads failed: {}", kernel.name(), r.detail);
        assert!(r.ops > 0.0);
    }
}

#[test]
fn ep_class_s_verifies() {
    verify_s(Kernel::Ep);
}

#[test]
fn is_class_s_verifies() {
    verify_s(Kernel::Is);
}

#[test]
fn cg_class_s_verifies() {
    verify_s(Kernel::Cg);
}

#[test]
fn mg_class_s_verifies() {
    verify_s(Kernel::Mg);
}

#[test]
fn ft_class_s_verifies() {
    verify_s(Kernel::Ft);
}

#[test]
fn more_threads_than_processors_still_verify() {
    let r = run(Kernel::Is, Class::S, 5, 1);
    assert!(r.verified, "{}", r.detail);
}

#[test]
fn bad_requests_are_errors() {
    assert_eq!(npb::run(Kernel::Ep, Class::S, 1, hosted::clock).err(), Some(Error::NotInRuntime));
    let zero =
        hosted::run(1, Placement::Unpinned, || npb::run(Kernel::Ep, Class::S, 0, hosted::clock));
    assert_eq!(zero.expect("mcrt runs").err(), Some(Error::NoThreads));
    let many =
        hosted::run(1, Placement::Unpinned, || npb::run(Kernel::Ep, Class::S, 257, hosted::clock));
    assert_eq!(many.expect("mcrt runs").err(), Some(Error::TooManyThreads { asked: 257 }));
    assert_eq!(Kernel::parse("FT"), Some(Kernel::Ft));
    assert_eq!(Kernel::parse("xx"), None);
    assert_eq!(Class::parse("w"), Some(Class::W));
    assert_eq!(Class::parse("B"), None);
}
