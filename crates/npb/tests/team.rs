//! The kernels on another runtime (`npb::par::with_team`, as the hosted rayon peer runs
//! them): every kernel at class S verifies with its loops' parts on OS threads, one per
//! part, at 1, 2 and 3 parts. (A process of its own: the team is process-wide.)

use npb::par::Team;
use npb::{Class, Kernel};

/// Each part on a scoped OS thread of its own.
struct OsThreads;

impl Team for OsThreads {
    fn run(&self, parts: usize, part: &(dyn Fn(usize) + Sync)) {
        std::thread::scope(|s| {
            for p in 0..parts {
                s.spawn(move || part(p));
            }
        });
    }
}

#[test]
fn every_kernel_verifies_on_another_team() {
    npb::par::with_team(&OsThreads, || {
        for kernel in Kernel::ALL {
            for threads in [1, 2, 3] {
                let r = npb::run(kernel, Class::S, threads, npb::hosted::clock)
                    .expect("a team needs no McRT runtime");
                assert!(r.verified, "{} S on {threads} parts failed: {}", kernel.name(), r.detail);
            }
        }
    });
    assert!(npb::par::team().is_none(), "the team is unset after with_team");
}
