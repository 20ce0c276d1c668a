//! Running NPB hosted on Linux: McRT on pinned (or unpinned) OS threads, and a clock.

use crate::Error;
use mcrt::hosted::LinuxHost;

/// Where McRT's processors run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// One per CPU, pinned (benchmarks).
    Pinned,
    /// Left to Linux (tests: more processors than CPUs).
    Unpinned,
}

/// Runs `main` as the first thread of a McRT runtime with `processors` processors
/// (stealing scheduler), and returns its result.
pub fn run<R: Send + 'static>(
    processors: usize,
    placement: Placement,
    main: impl FnOnce() -> R + Send + 'static,
) -> Result<R, Error> {
    if processors == 0 {
        return Err(Error::NoThreads);
    }
    if processors > crate::MAX_THREADS {
        return Err(Error::TooManyThreads { asked: processors });
    }
    let config = mcrt::Config::new(mcrt::Policy::Stealing, processors);
    let host = match placement {
        Placement::Pinned => LinuxHost::pinned(),
        Placement::Unpinned => LinuxHost::unpinned(),
    };
    mcrt::run(config, &host, main).map_err(Error::Runtime)
}

/// Nanoseconds since the first call (a [`crate::run`] clock).
pub fn clock() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
