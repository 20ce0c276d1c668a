//! The registry of in-kernel tests: what [`kernel_test!`] registers in the `.atoll_tests`
//! link section, and [`all`] lists. It sits below the console (whose `tests` command lists
//! the tests) and the tests themselves (`ktest`, at the top, which runs them and may test
//! the console).

use alloc::string::String;

/// A registered kernel test.
pub struct KernelTest {
    /// `layer.what`, e.g. `frames.concurrent`.
    pub name: &'static str,
    /// Fewest online cores the test needs.
    pub min_cores: usize,
    /// Whether `test=all` runs it, or only naming it does.
    pub isolation: Isolation,
    /// The test; `Err` says what went wrong.
    pub run: fn() -> Result<(), String>,
}

/// Whether a test shares its boot with the others (`test=all`) or needs one of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Runs under `test=all`, after and before other tests: it leaves the machine as it
    /// found it.
    Shared,
    /// Runs only when named (`test=NAME`), in a boot of its own: it leaves the machine
    /// changed (a core stopped, a channel left full, memory used up), which would fail or
    /// hide the tests after it.
    Alone,
}

/// Longest skip reason kept, in bytes (a longer one is cut at a character boundary).
const SKIP_REASON_MAX: usize = 200;

/// Why the running test could check nothing, if it said so ([`skip`]): its bytes and
/// length. A fixed buffer, not a `String`: a test skips from inside the balance check,
/// whose count of kernel heap bytes the reason must not change.
static SKIPPED: spin::Mutex<Option<([u8; SKIP_REASON_MAX], usize)>> = spin::Mutex::new(None);

/// Says that the running test can check nothing in this machine (too little memory, one
/// core), and why; it returns `Ok(())` for the test to return. The runner then reports
/// the test `TEST SKIP <name>: <reason>`, which never counts as passed; a test that
/// fails after this still fails. Call it only when the test's check did not run, never
/// for part of a test that checked something else (split such a test in two).
pub fn skip(reason: impl AsRef<str>) -> Result<(), String> {
    let reason = reason.as_ref();
    let mut len = reason.len().min(SKIP_REASON_MAX);
    while !reason.is_char_boundary(len) {
        len -= 1;
    }
    let mut bytes = [0; SKIP_REASON_MAX];
    bytes[..len].copy_from_slice(&reason.as_bytes()[..len]);
    *SKIPPED.lock() = Some((bytes, len));
    Ok(())
}

/// Takes the reason the last test gave for skipping, if it gave one (the runner, after
/// each test; also before, so a reason never carries over).
pub fn take_skip() -> Option<String> {
    let (bytes, len) = SKIPPED.lock().take()?;
    Some(String::from_utf8_lossy(&bytes[..len]).into_owned())
}

/// Registers a kernel test:
/// `kernel_test!(STATIC_NAME, "layer.what", min_cores, Shared | Alone, function);`, the
/// fourth argument naming an [`Isolation`].
#[macro_export]
macro_rules! kernel_test {
    ($static:ident, $name:expr, $min_cores:expr, $isolation:ident, $run:path) => {
        #[used]
        #[link_section = ".atoll_tests"]
        static $static: $crate::testing::KernelTest = $crate::testing::KernelTest {
            name: $name,
            min_cores: $min_cores,
            isolation: $crate::testing::Isolation::$isolation,
            run: $run,
        };
    };
}

// Only the addresses of these linker-script symbols are used, never their Rust layout.
#[allow(improper_ctypes)]
extern "C" {
    static __tests_start: KernelTest;
    static __tests_end: KernelTest;
}

/// Every registered test, in link order.
pub fn all() -> &'static [KernelTest] {
    let start = &raw const __tests_start;
    let end = &raw const __tests_end;
    let len = (end as usize - start as usize) / core::mem::size_of::<KernelTest>();
    // SAFETY: the linker script places exactly the `KernelTest` statics between the bounds.
    unsafe { core::slice::from_raw_parts(start, len) }
}
