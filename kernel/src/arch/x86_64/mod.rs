//! x86-64: boot, CPU structures, interrupts, the local APIC, timers, paging, SMP start.
pub mod boot;
pub mod cpu;
pub mod serial;
