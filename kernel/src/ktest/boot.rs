//! Layer 1 tests: every core is up, knows who it is, and sits where the firmware says.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::apic;
use crate::percpu::{self, CoreState};
use crate::{boot, kernel_test, smp};
use alloc::format;
use alloc::string::String;

kernel_test!(CORES_ONLINE, "boot.cores_online", 1, false, cores_online);
kernel_test!(CORE_IDENTITY, "boot.core_identity", 1, false, core_identity);
kernel_test!(NUMA_LOCAL_FRAMES, "boot.numa_local_frames", 1, false, numa_local_frames);

/// Every core the firmware lists is online.
fn cores_online() -> Result<(), String> {
    let listed = boot::FACTS.get().map_or(0, |f| f.cores_listed);
    let online = percpu::all_cores().filter(|c| c.state() == CoreState::Online).count();
    if listed == 0 || online != listed {
        return Err(format!("{online} of {listed} cores online"));
    }
    Ok(())
}

/// On every core, GS reaches that core's own block and the APIC id matches the MADT's.
fn core_identity() -> Result<(), String> {
    let cores = smp::online_cores();
    let outcomes = smp::run_on(&cores, JOB_TIMEOUT_US, &|index| {
        let me = percpu::this_core();
        if me.index != index || apic::id() != me.apic_id {
            return Err(format!(
                "block says core {} APIC {}, hardware says APIC {}",
                me.index,
                me.apic_id,
                apic::id()
            ));
        }
        Ok(())
    });
    all_ok(&cores, &outcomes)
}

/// Frames a core allocates come from its own NUMA node (when there are nodes).
fn numa_local_frames() -> Result<(), String> {
    let cores = smp::online_cores();
    let outcomes = smp::run_on(&cores, JOB_TIMEOUT_US, &|_| {
        let me = percpu::this_core();
        let pa = crate::mem::frames::alloc().ok_or("no frame")?;
        let node = crate::arch::acpi::node_of(pa);
        crate::mem::frames::free(pa).map_err(|e| format!("{e:?}"))?;
        match node {
            Some(n) if n != me.node => {
                Err(format!("frame {pa:#x} is on node {n}, core is on node {}", me.node))
            }
            _ => Ok(()),
        }
    });
    all_ok(&cores, &outcomes)
}
