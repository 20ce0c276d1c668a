//! Layer 1 tests: every core is up, knows who it is, and sits where the firmware says.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::apic;
use crate::percpu::{self, CoreState};
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};

kernel_test!(CORES_ONLINE, "boot.cores_online", 1, Shared, cores_online);
kernel_test!(PCI_DEVICES, "boot.pci_devices_of_q35", 1, Shared, pci_devices_of_q35);
kernel_test!(CORE_IDENTITY, "boot.core_identity", 1, Shared, core_identity);
kernel_test!(NUMA_LOCAL_FRAMES, "boot.numa_local_frames", 1, Shared, numa_local_frames);
kernel_test!(MULTICAST_TREE, "boot.multicast_tree_per_package", 1, Shared, multicast_tree);
kernel_test!(
    SHOOTDOWN_COSTS,
    "boot.skb_picks_the_measured_cheaper_protocol",
    2,
    Shared,
    skb_picks_the_measured_cheaper_protocol
);

/// Every core the firmware lists is online.
fn cores_online() -> Result<(), String> {
    let listed = crate::knowledge::FACTS.get().map_or(0, |f| f.cores_listed);
    let online = percpu::all_cores().filter(|c| c.state() == CoreState::Online).count();
    if listed == 0 || online != listed {
        return Err(format!("{online} of {listed} cores online"));
    }
    Ok(())
}

/// On every core, GS reaches that core's own block: each core's job counts itself under
/// the index its block gives and records the APIC id its hardware reports. Every online
/// core must be counted once, under its own index, with the APIC id the MADT gave it (a
/// block reached from the wrong core counts one core twice and another not at all).
fn core_identity() -> Result<(), String> {
    let cores = smp::online_cores();
    let n = percpu::core_count();
    let counted: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let apic_ids: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(u32::MAX)).collect();
    let outcomes = smp::run_on(&cores, JOB_TIMEOUT_US, &|_| {
        let me = percpu::this_core();
        let count = counted.get(me.index).ok_or("block index out of range")?;
        count.fetch_add(1, Ordering::Relaxed);
        apic_ids[me.index].store(apic::id(), Ordering::Relaxed);
        Ok(())
    });
    all_ok(&cores, &outcomes)?;
    for &c in &cores {
        let count = counted[c].load(Ordering::Relaxed);
        let apic = apic_ids[c].load(Ordering::Relaxed);
        let madt = percpu::core(c).map(|core| core.apic_id);
        if count != 1 || Some(apic) != madt {
            return Err(format!(
                "core {c}: its block was reached {count} times, last by APIC {apic}, MADT says {madt:?}"
            ));
        }
    }
    Ok(())
}

/// Frames a core allocates come from its own NUMA node (when there are nodes; then every
/// frame must be on one). Skipped on a machine of one node, where every frame is local.
fn numa_local_frames() -> Result<(), String> {
    let cores = smp::online_cores();
    let numa = crate::knowledge::FACTS.get().is_some_and(|f| f.nodes > 1);
    let outcomes = smp::run_on(&cores, JOB_TIMEOUT_US, &|_| {
        let me = percpu::this_core();
        let pa = crate::mem::frames::alloc().ok_or("no frame")?;
        let node = crate::arch::acpi::node_of(pa);
        crate::mem::frames::free(pa).map_err(|e| format!("{e:?}"))?;
        match node {
            Some(n) if n != me.node => {
                Err(format!("frame {pa:#x} is on node {n}, core is on node {}", me.node))
            }
            None if numa => Err(format!("frame {pa:#x} is on no NUMA node")),
            _ => Ok(()),
        }
    });
    all_ok(&cores, &outcomes)?;
    if !numa {
        return super::skip("one NUMA node: every frame is local");
    }
    Ok(())
}

/// The SKB places each core in the package CPUID gives it, and its multicast tree from
/// every core (Multikernel §5.1, Figure 6) has one branch per package: each aggregator and
/// its members in one package, the source's own package last (the source sends to those
/// cores itself), every other core reached exactly once. On a VM with one package the
/// tree is flat; with `-smp N,sockets=S` it has S branches. Prints the tree from core 0.
fn multicast_tree() -> Result<(), String> {
    let skb = crate::skb_replica::get().ok_or("the SKB is not measured")?;
    let cores = smp::online_cores();
    let mut packages = Vec::new();
    for &c in &cores {
        let location = percpu::core(c).ok_or("no block")?.location;
        let known = skb.core(c).map(|i| i.package);
        if known != Some(location.package) {
            return Err(format!("core {c}: SKB package {known:?}, CPUID {}", location.package));
        }
        packages.push(location.package);
    }
    packages.sort_unstable();
    packages.dedup();
    let package = |c: usize| skb.core(c).map(|i| i.package);
    for &source in &cores {
        let tree = skb.multicast_tree(source);
        let branches = tree.aggregators.len();
        if branches != packages.len() {
            return Err(format!(
                "tree from {source}: {branches} branches, {} packages",
                packages.len()
            ));
        }
        for (i, agg) in tree.aggregators.iter().enumerate() {
            let own = agg.core == source;
            if own != (i + 1 == branches) {
                return Err(format!("tree from {source}: the source's branch is not last"));
            }
            if agg.members.iter().any(|&m| package(m) != package(agg.core)) {
                return Err(format!(
                    "tree from {source}: core {} aggregates another package",
                    agg.core
                ));
            }
        }
        let mut reached = tree.destinations();
        reached.sort_unstable();
        let others: Vec<usize> = cores.iter().copied().filter(|&c| c != source).collect();
        if reached != others {
            return Err(format!("tree from {source} reaches {reached:?}, not {others:?}"));
        }
        if source == 0 {
            let mut text = String::new();
            for agg in &tree.aggregators {
                text += &format!(" {}>{:?}", agg.core, agg.members);
            }
            crate::println!("skb: multicast tree from core 0 (aggregator>members):{text}");
        }
    }
    Ok(())
}

/// The SKB measured shootdowns from the boot core to its package (Multikernel §5.1; issue
/// M9: the protocol is picked "from the topology and the measured latencies"): broadcast
/// and unicast to one core, and to all of them; and for a core of the package it picks the
/// one that measured cheaper (unicast on a tie).
fn skb_picks_the_measured_cheaper_protocol() -> Result<(), String> {
    use skb::Protocol;
    let skb = crate::skb_replica::get().ok_or("the SKB is not measured")?;
    let online = smp::online_cores();
    let mut peers = skb.package_mates(0);
    peers.retain(|c| online.contains(c));
    let Some(&peer) = peers.first() else {
        return super::skip("every other core is in another package: nothing was measured");
    };
    let mut sizes = Vec::from([1, peers.len()]);
    sizes.dedup();
    for n in sizes {
        let cost = |p| {
            skb.shootdown_costs()
                .iter()
                .find(|&&(q, m, _)| (q, m) == (p, n))
                .map(|&(_, _, c)| c)
                .ok_or(format!("no {} to {n} measured", p.name()))
        };
        let (b, u) = (cost(Protocol::Broadcast)?, cost(Protocol::Unicast)?);
        let want = if b < u { Protocol::Broadcast } else { Protocol::Unicast };
        let got = skb.pick_protocol(0, peers[..n].iter().copied());
        if got != want {
            return Err(format!("to {n}: broadcast {b}, unicast {u}, picked {}", got.name()));
        }
    }
    crate::println!(
        "skb: from core 0 the SKB picks {} to core {peer}",
        skb.pick_protocol(0, [peer]).name()
    );
    Ok(())
}

/// The boot's PCI scan (issue M12 item 1) found q35's own functions, whatever else the VM
/// has: the host bridge 00:00.0 (8086:29c0, class 06.00), the LPC bridge 00:1f.0
/// (8086:2918) and the AHCI controller 00:1f.2 (8086:2922, class 01.06.01) with a BAR the
/// firmware assigned; no function twice, none with the "no device" vendor id; and each is
/// a device of `device_list`, whose `device_stat` gives its class code and first BAR.
fn pci_devices_of_q35() -> Result<(), String> {
    use abi::device_kind::{PCI, PCI_HWID_BASE};
    let functions = crate::arch::pci::functions();
    let at = |location: u16| functions.iter().find(|f| f.location() == location);
    let bridge = at(0).ok_or("no function 00:00.0")?;
    if (bridge.vendor_id, bridge.device_id, bridge.class_code >> 8) != (0x8086, 0x29c0, 0x0600) {
        return Err(format!("00:00.0 is {bridge:?}, not q35's host bridge"));
    }
    let lpc = at(0x1f << 3).ok_or("no function 00:1f.0")?;
    if (lpc.vendor_id, lpc.device_id) != (0x8086, 0x2918) {
        return Err(format!("00:1f.0 is {lpc:?}, not q35's LPC bridge"));
    }
    let ahci = at(0x1f << 3 | 2).ok_or("no function 00:1f.2")?;
    let bar = ahci.first_bar().ok_or("00:1f.2 (AHCI) has no BAR")?;
    if ahci.class_code != 0x01_06_01 || bar.address == 0 || bar.size == 0 {
        return Err(format!("00:1f.2 is {ahci:?}"));
    }
    for pair in functions.windows(2) {
        if pair[0].location() >= pair[1].location() {
            return Err(format!("functions out of order or twice: {pair:?}"));
        }
    }
    if let Some(f) = functions.iter().find(|f| f.vendor_id == 0xffff) {
        return Err(format!("a function with no device: {f:?}"));
    }
    let listed = crate::corey::device::list();
    let nic = crate::drivers::virtio_net::info().map(|n| n.hwid);
    for f in functions {
        let hwid = PCI_HWID_BASE + f.location() as u64;
        if nic == Some(hwid) {
            // The started NIC is listed as a network device (`net.virtio_arp_is_answered`).
            if !listed.iter().any(|d| d.hwid == hwid && d.kind == abi::device_kind::NET) {
                return Err(format!("{f:?} (the NIC) is not in device_list as NET"));
            }
            continue;
        }
        if !listed.iter().any(|d| d.hwid == hwid && d.kind == PCI) {
            return Err(format!("{f:?} is not in device_list"));
        }
        let stat = crate::corey::device::stat(hwid).ok_or("no device_stat")?;
        let first = f.first_bar().map_or(0, |b| b.address);
        if (stat.count, stat.detail) != (f.class_code as u64, first) {
            return Err(format!("device_stat of {hwid:#x}: {stat:?}"));
        }
    }
    Ok(())
}
