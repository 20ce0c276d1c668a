//! What the scheduler's state machines ([`crate::inbox`], [`crate::turn`]) need of a
//! thread. The kernel's thread is a box of registers, tables and objects; the host tests'
//! is a plain struct. Nothing here moves a thread between cores or switches to it: the
//! machines only decide, and the kernel carries the decisions out.

/// A thread as the scheduler's pure state machines see it.
pub trait Thread {
    /// What names the address space its waits are in (the kernel: its root range). It is
    /// handed back when none of that space's threads waits on this core any more, so the
    /// kernel can stop asking other cores to send wakes of that space here.
    type Space;

    /// Whether its affinity allows core `core`.
    fn allowed_on(&self, core: usize) -> bool;

    /// Whether its program was stopped (its threads end wherever they are found).
    fn stopping(&self) -> bool;

    /// Whether the NUMA policy lets it move from core `from` to core `to` while it runs
    /// (AMPS §2.4.2: always, same node only, or by its resident set).
    fn may_move_running(&self, from: usize, to: usize) -> bool;

    /// It arrived on core `core` (it now counts as held there).
    fn arrived(&mut self, core: usize);

    /// A wake-up released it from a wait queue: its blocking call returns "woken" (or the
    /// joined thread's status).
    fn woken(&mut self);

    /// The address space its waits are in.
    fn space(&self) -> Self::Space;
}
