//! `peerdeath`: a library wait sees a peer that faulted (issue M14).

use super::Check;
use libatoll::println;
use libatoll::thread::{self};

/// `peerdeath`: a thread faults while its peers will wait for it at a barrier; the
/// peers' waits must end and `run_threads` report the failure.
pub(crate) fn peer_death() -> Check {
    use workloads::Platform;
    let p = libatoll::platform::Atoll::new(libatoll::cores::all_cores());
    let barrier = workloads::amps::Barrier::new(3);
    let result = p.run_threads(3, None, &|i| {
        barrier.wait(&p);
        if i == 1 {
            // SAFETY: deliberately not safe: this write faults, which ends this thread
            // alone (its peers then wait at the barrier for a thread that is gone).
            unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
        }
        if i == 2 {
            // The last waiter comes late, once the first has given up and the main thread
            // has joined it and the faulted one: it must still see the faulted peer.
            let _ = thread::sleep_us(200_000);
        }
        barrier.wait(&p);
    });
    match result {
        Err(why) => {
            println!("threadtest: peerdeath: run_threads failed, as it must: {why}");
            Ok(())
        }
        Ok(()) => Err("every thread passed a barrier a faulted thread never reached"),
    }
}
