//! The scheduler's messages between cores (declared once here; the monitor's handler
//! table routes their tags to [`super::inbox::on_message`], which files them).

use super::running::Running;
use protocol::Carried;

::protocol::messages! {
    /// Scheduler traffic: threads moving, wake-ups and joins across cores, load reports
    /// and pulls (AMPS §2.2–§2.3, by message), and stops of parked threads.
    #[derive(Debug)]
    pub enum SchedMessage {
        /// A thread for this core: the box is the receiver's now.
        Arrive { thread: Carried<Running> } = 16,
        /// Wake up to `n` waiters on the word at `addr` of address space `space`, then
        /// pass the rest on to the lowest core in the mask `cores`.
        Wake { space: u64, addr: u64, n: u64, cores: u64 } = 17,
        /// Thread `uid` ended: wake its joiners here.
        Joined { uid: u64 } = 18,
        /// Core `origin`'s run-queue length (report number `seq`), and whether it takes
        /// threads (`online`: false while dedicated to one context); with `forward` the
        /// receiver, its package's aggregator in the SKB's multicast tree, passes it on
        /// within its package.
        Load { length: u64, seq: u64, online: bool, origin: usize, forward: bool } = 19,
        /// The sender asks for one thread (the running one too, if `may_take_running`).
        Pull { may_take_running: bool } = 20,
        /// The answer to a pull that found nothing to give (the puller waits out its
        /// patience before it asks again: a source whose extra threads are pinned would
        /// otherwise be asked at every turn).
        NoneToGive {} = 21,
        /// A program was stopped (its main thread ended, its pcore was halted): end the
        /// threads of stopped programs parked or queued here (issue M14).
        Reap {} = 22,
    }
}
