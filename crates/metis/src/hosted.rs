//! Running Metis hosted on Linux: McRT on pinned (or unpinned) OS threads
//! (`mcrt::hosted`), and a clock (for [`crate::Config::clock`]).

use crate::Error;
pub use mcrt::hosted::{clock, Placement};

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
    mcrt::hosted::run_stealing(processors, placement, main).map_err(Error::Runtime)
}
