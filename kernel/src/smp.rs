//! Cores working together, M1 style: starting the application processors, each core's
//! idle loop, and a cross-core job slot for running code on chosen cores (the test harness
//! and the console use it). M2 replaces the job slot with URPC channels and monitors.

use crate::arch::{apic, cpu, start_ap, timer, trap};
use crate::percpu::{self, CoreState, PerCore};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU8, Ordering};

/// What a job returns: `Err` carries the reason it failed.
pub type JobResult = Result<(), String>;

/// Work that runs on a core: gets the core's index.
pub type Work<'a> = dyn Fn(usize) -> JobResult + Sync + 'a;

const POSTED: u8 = 0;
const DONE: u8 = 1;
const FAULTED: u8 = 2;

/// One job posted to one core's mailbox.
pub struct Job {
    work: *const Work<'static>,
    state: AtomicU8,
    fault_vector: AtomicU8,
    result: UnsafeCell<Option<JobResult>>,
}

// SAFETY: `result` is written by the running core before `state` becomes DONE (Release)
// and read by the poster only after it sees DONE (Acquire).
unsafe impl Sync for Job {}

impl Job {
    /// Called by the trap handler of the core running this job.
    pub fn mark_faulted(&self, _core: usize, vector: u8) {
        self.fault_vector.store(vector, Ordering::Relaxed);
        self.state.store(FAULTED, Ordering::Release);
    }
}

/// How a job ended on one core.
#[derive(Debug)]
pub enum Outcome {
    /// The work returned.
    Done(JobResult),
    /// The core took exception `vector` while running it (and is now stopped).
    Faulted(u8),
    /// No answer within the time limit.
    TimedOut,
    /// The core is not online.
    NotOnline,
}

impl Outcome {
    /// Whether the work ran and returned `Ok`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Done(Ok(())))
    }
}

/// Runs `work` on each core in `cores` at once (inline on the calling core if listed) and
/// waits up to `timeout_us` for all of them. Outcomes are in the order of `cores`.
///
/// A job that times out is leaked, not freed, since its core may still run it; callers
/// treat a timeout as the end of the run.
pub fn run_on(cores: &[usize], timeout_us: u64, work: &Work<'_>) -> Vec<Outcome> {
    let me = percpu::this_core().index;
    // SAFETY: we wait below until every posted job has finished or faulted, or leak it; the
    // lifetime is erased only for storage in the mailbox.
    let work_ptr: *const Work<'static> = unsafe { core::mem::transmute(work as *const Work<'_>) };
    let mut jobs: Vec<Option<Box<Job>>> = Vec::with_capacity(cores.len());
    for &c in cores {
        let target = match percpu::core(c) {
            Some(t) if c != me && t.state() == CoreState::Online => t,
            _ => {
                jobs.push(None);
                continue;
            }
        };
        let job = Box::new(Job {
            work: work_ptr,
            state: AtomicU8::new(POSTED),
            fault_vector: AtomicU8::new(0),
            result: UnsafeCell::new(None),
        });
        let ptr = &*job as *const Job as *mut Job;
        while target
            .mailbox
            .compare_exchange(
                core::ptr::null_mut(),
                ptr,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            cpu::pause();
        }
        apic::send_ipi(target.apic_id, trap::VECTOR_WAKE);
        jobs.push(Some(job));
    }
    let local = cores.contains(&me).then(|| work(me));
    let start = cpu::rdtsc();
    let mut outcomes = Vec::with_capacity(cores.len());
    for (i, job) in jobs.into_iter().enumerate() {
        let outcome = match job {
            None if cores[i] == me => Outcome::Done(local.clone().unwrap_or(Ok(()))),
            None => Outcome::NotOnline,
            Some(job) => loop {
                match job.state.load(Ordering::Acquire) {
                    // SAFETY: DONE publishes `result` (see `Sync` impl); we own the box.
                    DONE => {
                        break Outcome::Done(
                            unsafe { (*job.result.get()).take() }.unwrap_or(Ok(())),
                        )
                    }
                    FAULTED => break Outcome::Faulted(job.fault_vector.load(Ordering::Relaxed)),
                    _ if timer::us_since(start) > timeout_us => {
                        Box::leak(job);
                        break Outcome::TimedOut;
                    }
                    _ => cpu::pause(),
                }
            },
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// Indices of the cores that are online now.
pub fn online_cores() -> Vec<usize> {
    percpu::all_cores()
        .filter(|c| c.state() == CoreState::Online)
        .map(|c| c.index)
        .collect()
}

fn run_job(core: &PerCore, job: *mut Job) {
    core.running_job.store(job, Ordering::Release);
    // SAFETY: the poster keeps the job (and its work) alive until it sees DONE or FAULTED.
    let result = unsafe { (*(*job).work)(core.index) };
    core.running_job
        .store(core::ptr::null_mut(), Ordering::Release);
    // SAFETY: as above; after the DONE store the job is the poster's again.
    unsafe {
        *(*job).result.get() = Some(result);
        (*job).state.store(DONE, Ordering::Release);
    }
}

/// An application processor's life after start-up: wait for jobs, run them, halt when idle.
pub fn idle_loop(core: &'static PerCore) -> ! {
    loop {
        // Check the mailbox with interrupts off, then `sti; hlt` atomically, so a wake-up
        // IPI between the check and the halt is not lost.
        cpu::disable_interrupts();
        let job = core.mailbox.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if job.is_null() {
            cpu::enable_and_halt();
            continue;
        }
        cpu::enable_interrupts();
        run_job(core, job);
    }
}

/// Starts every application processor whose block is published, one after another; each
/// continues its own initialisation while the next is started. Returns the number of cores
/// that acknowledged.
pub fn start_application_processors() -> usize {
    let mut started = 0;
    for core in percpu::all_cores().skip(1) {
        core.set_state(CoreState::Starting);
        match start_ap::start(core.apic_id, core.index, core.stack_range().1) {
            Ok(()) => started += 1,
            Err(e) => {
                core.set_state(CoreState::Offline);
                crate::println!(
                    "smp: core {} (APIC id {}) did not start: {:?}",
                    core.index,
                    core.apic_id,
                    e
                );
            }
        }
    }
    started
}

/// Waits until no core is still starting (or `timeout_us` passes). Returns the online count.
pub fn wait_for_online(timeout_us: u64) -> usize {
    let start = cpu::rdtsc();
    while percpu::all_cores().any(|c| c.state() == CoreState::Starting)
        && timer::us_since(start) < timeout_us
    {
        cpu::pause();
    }
    percpu::all_cores()
        .filter(|c| c.state() == CoreState::Online)
        .count()
}
