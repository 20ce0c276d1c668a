//! Hosted tests of stacks carved from memory a host provides (`Host::stack_memory`, issue
//! M15: on Atoll, segments spread over the cores' memory).

use mcrt::context::{Stack, STACK_BYTES};
use mcrt::hosted::LinuxHost;
use mcrt::{Config, Host, Policy};
use std::alloc::{alloc_zeroed, Layout};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Stacks in one batch the test host gives.
const BATCH: usize = 8;

/// Linux's host, giving stack memory in batches of [`BATCH`] (at most `most` batches).
struct Carving {
    inner: LinuxHost,
    batches: AtomicUsize,
    most: usize,
}

impl Host for Carving {
    fn run_processors(
        &self,
        count: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Result<(), &'static str> {
        self.inner.run_processors(count, body)
    }
    fn wait(&self, word: &AtomicU32, expected: u32, timeout_us: u64) {
        self.inner.wait(word, expected, timeout_us)
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.inner.wake(word, n)
    }
    fn now(&self) -> u64 {
        self.inner.now()
    }
    fn stack_memory(&self) -> Option<(usize, usize)> {
        if self.batches.fetch_add(1, Ordering::Relaxed) >= self.most {
            return None;
        }
        let layout = Layout::from_size_align(BATCH * STACK_BYTES, STACK_BYTES).ok()?;
        // SAFETY: a non-zero size; the memory is the runtime's for good (never freed).
        let base = unsafe { alloc_zeroed(layout) };
        (!base.is_null()).then_some((base as usize, BATCH))
    }
}

/// 100 threads live at once take their stacks from the host's batches (then from the
/// allocator once the host has none left), run, and are joined; the host's stacks go to the
/// pool and stay there beyond its usual bound, so later threads reuse them.
#[test]
fn live_threads_take_stacks_from_the_host_and_keep_them() {
    let host = Carving { inner: LinuxHost::unpinned(), batches: AtomicUsize::new(0), most: 4 };
    let r = mcrt::run(Config::new(Policy::Local, 1), &host, move || {
        let live = mcrt::selftest::live(100);
        // The first thread made after: a stack from the pool, one the host gave.
        let h = mcrt::spawn(|| {
            // SAFETY: the running thread's own stack, which it does not give up here.
            let me = unsafe { Stack::from_base(mcrt::context::stack_base_of_sp() as *mut u8) };
            let made = me.host_made();
            let _ = me.into_base();
            made
        })
        .unwrap();
        (live, h.join())
    });
    assert_eq!(r, Ok((Ok(()), Some(true))));
    // The host was asked until it had none left (4 batches of 8 for 100 threads).
    assert!(host.batches.load(Ordering::Relaxed) > 4);
}
