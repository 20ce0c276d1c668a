//! The kernel's layers, bottom first: the one list of them. Each top-level module uses only
//! the modules before it here (`xtask/tests/kernel_layers.rs` reads this file and checks
//! every source file against it, and checks that `docs/architecture.md` names the same
//! order); the in-kernel tests run layer by layer in this order, so the first failing test
//! names the lowest broken layer (`ktest::run`). Where a lower layer must reach up, the
//! upper one installs a handler at boot (`docs/architecture.md`, "Layers").

/// One layer: its module and the prefixes of the in-kernel tests of it (what it holds is
/// the comment beside it).
pub struct Layer {
    /// The top-level module (`kernel/src/NAME.rs` or `kernel/src/NAME/`).
    pub module: &'static str,
    /// The in-kernel tests of it, by the first part of their names (`frames.alloc`).
    pub tests: &'static [&'static str],
}

/// The layers, bottom first.
pub const LAYERS: &[Layer] = &[
    // This list.
    Layer { module: "layers", tests: &[] },
    // The kernel's tunables (declarations only).
    Layer { module: "param", tests: &[] },
    // Hardware glue: boot entry, traps, APIC, paging, ACPI.
    Layer { module: "arch", tests: &["trap"] },
    // Each core's block (GS) and per-core state slots.
    Layer { module: "percpu", tests: &[] },
    // Emulated slow cores (duty cycle of the timer).
    Layer { module: "throttle", tests: &[] },
    // The serial console's output.
    Layer { module: "print", tests: &["print"] },
    // Each core's replica of the SKB and its multicast trees (set by `knowledge`).
    Layer { module: "skb_replica", tests: &[] },
    // Each core's ends of the URPC channels, the one table of message handlers, sending
    // and reading.
    Layer { module: "transport", tests: &["transport"] },
    // TLB shootdown.
    Layer { module: "tlb", tests: &["tlb"] },
    // Frames and heaps.
    Layer { module: "mem", tests: &["frames", "heap"] },
    // The boot module of user programs.
    Layer { module: "initrd", tests: &[] },
    // The monitor's own messages: pings, remote calls, frame returns; poll, then halt.
    Layer { module: "monitor", tests: &["monitor"] },
    // Starting cores, work on chosen cores.
    Layer { module: "smp", tests: &[] },
    // The SKB and boot facts.
    Layer { module: "knowledge", tests: &["boot"] },
    // Device drivers over the PCI scan (virtio-net).
    Layer { module: "drivers", tests: &["net"] },
    // The disk's files: ext2 over Corey's buffer cache (issue M13).
    Layer { module: "storage", tests: &["storage"] },
    // Two-phase commit between the monitors.
    Layer { module: "twophase", tests: &["twophase"] },
    // Frames change owner by two-phase commit.
    Layer { module: "retype", tests: &["retype"] },
    // In-kernel experiments.
    Layer { module: "bench", tests: &[] },
    // What every core knows of a thread; how a program ended.
    Layer { module: "thread", tests: &[] },
    // Corey's objects: shares, segments, address ranges, pcores, devices.
    Layer { module: "corey", tests: &[] },
    // Kernel cores: a core that polls devices and syscall devices (Corey §3.2, §4.4).
    Layer { module: "kcore", tests: &[] },
    // Threads, run queues, migration and load (AMPS).
    Layer { module: "sched", tests: &[] },
    // Loading and starting programs, the system-call dispatcher, user traps.
    Layer { module: "user", tests: &["user"] },
    // Where traps land (above the layers they call into).
    Layer { module: "interrupts", tests: &["interrupts"] },
    // The test registry.
    Layer { module: "testing", tests: &[] },
    // The kernel console.
    Layer { module: "console", tests: &["console"] },
    // The in-kernel tests.
    Layer { module: "ktest", tests: &[] },
    // The boot core's path, top to bottom.
    Layer { module: "boot", tests: &[] },
];
