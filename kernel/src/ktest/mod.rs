//! In-kernel integration tests. Each test is registered by name in the `.atoll_tests`
//! link section (see [`kernel_test!`]), selected with `-append test=NAME` (or `test=all`),
//! runs on the boot core and spreads work to the cores it needs with `smp::run_on`.
//! The runner prints one line per test and a summary in the `verdict` protocol, then exits
//! QEMU through `isa-debug-exit`; the host runner judges the serial log.
//!
//! Each test's name starts with its layer, and the runner runs the layers bottom up
//! ([`LAYERS`]), so the first failing test names the broken layer.

mod balance;
mod boot;
mod console;
mod frames;
mod heap;
mod interrupts;
mod monitor;
mod traps;
mod user;

use crate::arch::{cpu, power, timer};
use crate::{println, smp};
use alloc::string::String;
use verdict::ExitCode;

/// A registered kernel test.
pub struct KernelTest {
    /// `layer.what`, e.g. `frames.concurrent`.
    pub name: &'static str,
    /// Fewest online cores the test needs.
    pub min_cores: usize,
    /// Run only when named (it leaves the machine changed, e.g. a core stopped).
    pub isolated: bool,
    /// The test; `Err` says what went wrong.
    pub run: fn() -> Result<(), String>,
}

/// Registers a kernel test: `kernel_test!(STATIC_NAME, "layer.what", min_cores, isolated, function);`
#[macro_export]
macro_rules! kernel_test {
    ($static:ident, $name:expr, $min_cores:expr, $isolated:expr, $run:path) => {
        #[used]
        #[link_section = ".atoll_tests"]
        static $static: $crate::ktest::KernelTest = $crate::ktest::KernelTest {
            name: $name,
            min_cores: $min_cores,
            isolated: $isolated,
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

/// Runs the tests `selector` names (`all`, or one test's name), prints the verdict lines
/// and exits QEMU with the verdict. `list` prints the names instead.
pub fn run(selector: &str) -> ! {
    let online = smp::online_cores().len();
    if selector == "list" {
        for t in all() {
            println!("test {} min_cores={} isolated={}", t.name, t.min_cores, t.isolated);
        }
        power::exit_qemu(ExitCode::Success);
    }
    let mut tests: alloc::vec::Vec<&KernelTest> = all().iter().collect();
    tests.sort_by_key(|t| (layer_rank(t.name), t.name));
    let (mut passed, mut failed) = (0, 0);
    for test in tests {
        let chosen = if selector == "all" {
            !test.isolated && test.min_cores <= online
        } else {
            test.name == selector
        };
        if !chosen {
            continue;
        }
        let start = cpu::rdtsc();
        let result = if online < test.min_cores {
            Err(alloc::format!("needs {} cores, {} online", test.min_cores, online))
        } else {
            (test.run)()
        };
        match result {
            Ok(()) => {
                passed += 1;
                println!(
                    "{}{} cores={} us={}",
                    verdict::PASS_MARKER,
                    test.name,
                    online,
                    timer::us_since(start)
                );
            }
            Err(why) => {
                failed += 1;
                println!("{}{}: {}", verdict::FAIL_MARKER, test.name, why);
            }
        }
    }
    if passed + failed == 0 {
        println!("{}{}: no such test", verdict::FAIL_MARKER, selector);
        failed = 1;
    }
    println!("{}passed={} failed={}", verdict::SUMMARY_MARKER, passed, failed);
    power::exit_qemu(if failed == 0 { ExitCode::Success } else { ExitCode::Failure })
}

/// The layers, bottom up: the first word of a test's name (`heap.cross_core_free`).
const LAYERS: &[&str] =
    &["boot", "frames", "heap", "interrupts", "trap", "monitor", "user", "console"];

/// Where a test's layer comes in [`LAYERS`] (an unknown layer last).
fn layer_rank(name: &str) -> usize {
    let layer = name.split('.').next().unwrap_or("");
    LAYERS.iter().position(|&l| l == layer).unwrap_or(LAYERS.len())
}

pub use crate::smp::all_ok;

/// Time limit for one job in a test (generous: 16 vCPUs under TCG on two host cores).
pub const JOB_TIMEOUT_US: u64 = 60_000_000;
