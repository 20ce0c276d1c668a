//! The agreement simulator beside the measured shootdowns (issue M9; Multikernel §5.1,
//! Figures 6 and 7): `agreement-sim` predicts, from the per-message costs the kernel
//! measured in the same run (`bench shootdown`'s `one_way_cycles` lines), the latency of
//! each protocol at every measured point and out to 64 cores, and the report shows
//! prediction beside measurement with the error of each point ([`section`]); and the
//! unmap latency built on it ([`unmap_section`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use agreement_sim::{costs_from_measurements, predict, relative_error, Costs, Measured, Protocol};
use agreement_sim::{curve, Topology};

use super::records::{number, text, Record};
use record::median;

/// The error the model must stay within at every measured point (issue M9's goal).
const WITHIN: f64 = 0.25;

/// One VM's shape: (cores, sockets).
type Vm = (u64, u64);

fn vm_of(r: &Record) -> Vm {
    let cores = number(r, "cores").unwrap_or(0.0) as u64;
    (cores, number(r, "sockets").unwrap_or(1.0).max(1.0) as u64)
}

/// The costs fitted from one VM's `one_way_cycles` records, if it has any. A VM of one core
/// per package has no local link: its remote one stands in (no message there stays within a
/// package).
fn costs_of(records: &[&Record], vm: Vm) -> Option<Costs> {
    let link = |name: &str| {
        let mut v: Vec<f64> = records
            .iter()
            .filter(|r| vm_of(r) == vm && text(r, "metric") == "one_way_cycles")
            .filter(|r| text(r, "link") == name)
            .filter_map(|r| number(r, "value"))
            .collect();
        median(&mut v)
    };
    let local = link("local").or_else(|| link("remote"))?;
    let measured = Measured {
        round_trip_local: 2.0 * local,
        round_trip_remote: link("remote").map(|r| 2.0 * r),
        send: None,
        receive: None,
    };
    Some(costs_from_measurements(&measured))
}

fn protocol_named(name: &str) -> Option<Protocol> {
    Protocol::ALL.into_iter().find(|p| p.name() == name)
}

/// Appends the model's tables to the `shootdown` section (nothing without Atoll's records).
pub fn section(out: &mut String, records: &[&Record]) {
    let atoll: Vec<&Record> =
        records.iter().copied().filter(|r| text(r, "system") == "atoll").collect();
    let mut table = Fit::default();
    for ((vm, k, protocol), (values, crowded)) in shootdown_points(&atoll) {
        let (Some(costs), Some(p)) = (costs_of(&atoll, vm), protocol_named(&protocol)) else {
            continue;
        };
        table.add(vm, k, p, values, crowded, costs);
    }
    let Some((vm, _, costs)) = table.biggest else { return };
    let (within, total, oversubscribed) = (table.within, table.total, table.oversubscribed);
    let crowded_note = if oversubscribed > 0 {
        format!(
            " {oversubscribed} more come from VMs with more vCPUs than the host has CPUs \
             (marked): there a message waits for its receiver's vCPU to be scheduled, which \
             measures the host, not the protocol, so they are not counted."
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\nThe model (`crates/agreement-sim`) beside the measurement: costs fitted from the \
         one-way latencies `bench shootdown` measured in the same boot (send {:.0}, receive \
         {:.0}, transit local {:.0} / remote {:.0}, shared line per reader {:.0} cycles). \
         {within} of {total} measured points are within {:.0}% (the goal: all).{crowded_note} \
         Error is |predicted − measured| / measured.\n\n\
         | packages×cores | cores | protocol | measured (cycles) | predicted | error |\n\
         | --- | --- | --- | --- | --- | --- |",
        costs.send,
        costs.receive,
        costs.transit_local,
        costs.transit_remote,
        costs.shared_line_per_reader,
        WITHIN * 100.0
    );
    for row in table.rows {
        let _ = writeln!(out, "{row}");
    }
    beyond_the_machine(out, vm, &costs);
}

/// Measured points: (vm, k, protocol) -> (values, whether a VM had more vCPUs than the
/// host has CPUs).
type ShootdownPoints = BTreeMap<(Vm, u64, String), (Vec<f64>, bool)>;

/// Atoll's measured shootdown latencies, by point.
fn shootdown_points(atoll: &[&Record]) -> ShootdownPoints {
    let mut points = ShootdownPoints::new();
    for r in atoll.iter().filter(|r| text(r, "metric") == "latency_cycles") {
        let k = number(r, "active_cores").or_else(|| number(r, "cores")).unwrap_or(0.0) as u64;
        if let Some(v) = number(r, "value") {
            let point = points.entry((vm_of(r), k, text(r, "protocol").to_string())).or_default();
            point.0.push(v);
            point.1 |= r.get("oversubscribed").and_then(|o| o.as_bool()) == Some(true);
        }
    }
    points
}

/// The model beside the measurement, point by point: the table's rows, the counts of
/// points within [`WITHIN`], and the VM whose costs to extrapolate with.
#[derive(Default)]
struct Fit {
    rows: Vec<String>,
    within: usize,
    total: usize,
    oversubscribed: usize,
    /// The biggest VM that is not oversubscribed (its one-way latencies are the host's
    /// scheduling otherwise), if there is one: (vm, crowded, its costs).
    biggest: Option<(Vm, bool, Costs)>,
}

impl Fit {
    /// One measured point: `values` of protocol `p` at `k` cores of `vm` (`crowded`: a VM
    /// with more vCPUs than the host has CPUs), predicted with `costs`.
    fn add(
        &mut self,
        vm: Vm,
        k: u64,
        p: Protocol,
        mut values: Vec<f64>,
        crowded: bool,
        costs: Costs,
    ) {
        if self.biggest.is_none_or(|(b, b_crowded, _)| {
            (b_crowded && !crowded) || (b_crowded == crowded && vm.0 >= b.0)
        }) {
            self.biggest = Some((vm, crowded, costs));
        }
        let topo = Topology { packages: vm.1 as usize, cores_per_package: (vm.0 / vm.1) as usize };
        // A point exists only once a value was pushed to it, so there is a median.
        let measured = median(&mut values).unwrap_or(0.0);
        let predicted = predict(p, topo, k as usize, &costs);
        let error = relative_error(predicted, measured);
        // A vCPU waiting for a host CPU costs milliseconds, which no protocol model
        // predicts: such points are shown, not counted.
        if crowded {
            self.oversubscribed += 1;
        } else {
            self.total += 1;
            if error.abs() <= WITHIN {
                self.within += 1;
            }
        }
        self.rows.push(format!(
            "| {}×{} | {k}{} | {} | {measured:.0} | {predicted:.0} | {:.0}% |",
            vm.1,
            vm.0 / vm.1,
            if crowded { " (oversubscribed)" } else { "" },
            p.name(),
            error * 100.0
        ));
    }
}

/// Each protocol's predicted latency on 8 packages × 8 cores, with `vm`'s costs.
fn beyond_the_machine(out: &mut String, vm: Vm, costs: &Costs) {
    let big = Topology { packages: 8, cores_per_package: 8 };
    let _ = writeln!(
        out,
        "\nPredicted beyond the machine, 8 packages × 8 cores, with the costs of the \
         {}-core VM (cycles; Figure 6's shape: NUMA-aware multicast should be the \
         flattest):\n\n| cores | {} |\n| --- |{}",
        vm.0,
        Protocol::ALL.map(|p| p.name()).join(" | "),
        " --- |".repeat(Protocol::ALL.len())
    );
    let curves: Vec<Vec<(usize, f64)>> =
        Protocol::ALL.into_iter().map(|p| curve(p, big, costs)).collect();
    for n in [2, 4, 8, 16, 32, 64] {
        let cells: Vec<String> = curves
            .iter()
            .map(|c| {
                c.iter().find(|(m, _)| *m == n).map_or("—".into(), |(_, v)| format!("{v:.0}"))
            })
            .collect();
        let _ = writeln!(out, "| {n} | {} |", cells.join(" | "));
    }
}

/// Figure 7 from the model: the unmap latency at N cores is the measured local floor (N =
/// 1: the edit and this core's own flush) plus the shootdown's agreement among the N cores
/// by the protocol the SKB picks (unicast within one package, NUMA-aware multicast
/// across), where each participant's cost to receive grows by the kick that interrupts
/// its user code. The kick is the one cost `bench shootdown` does not measure (its
/// participants poll in the kernel): it is fitted at the smallest measured N ≥ 2, so that
/// point is no check; the others are. Appends nothing without both experiments' records.
pub fn unmap_section(out: &mut String, unmap: &[&Record], shootdown: &[&Record]) {
    let atoll = |rs: &[&Record]| -> Vec<Record> {
        rs.iter().filter(|r| text(r, "system") == "atoll").map(|r| (*r).clone()).collect()
    };
    let (unmap, shootdown) = (atoll(unmap), atoll(shootdown));
    let shootdown: Vec<&Record> = shootdown.iter().collect();
    let points = reduce_points(&unmap);
    // The biggest VM with a floor, measured costs and a point to fit the kick at.
    let vms: Vec<Vm> = points.keys().map(|(vm, _)| *vm).collect();
    let Some((vm, model)) = vms.into_iter().rev().find_map(|vm| {
        let floor = median(&mut points.get(&(vm, 1))?.clone())?;
        let costs = costs_of(&shootdown, vm)?;
        let topo = Topology { packages: vm.1 as usize, cores_per_package: (vm.0 / vm.1) as usize };
        let model = UnmapModel { floor, costs, topo };
        points.keys().any(|&(v, n)| v == vm && n >= 2).then_some((vm, model))
    }) else {
        return;
    };
    let measured: Vec<(u64, f64)> = points
        .iter()
        .filter(|((v, n), _)| *v == vm && *n >= 2)
        .map(|((_, n), values)| (*n, median(&mut values.clone()).unwrap_or(0.0)))
        .collect();
    let (fit_n, fit_value) = measured[0];
    let kick = model.fit_kick(fit_n as usize, fit_value);
    let _ = writeln!(
        out,
        "\nThe model of Figure 7 (`crates/agreement-sim`, costs from `shootdown` in the same \
         run): the local floor ({:.0} cycles, N = 1) plus the shootdown among N cores by \
         {}, each participant's receive cost grown by the kick that interrupts its user code \
         ({kick:.0} cycles, fitted at N = {fit_n}: that point is no check).\n\n\
         | packages×cores | N | measured `reduce` (cycles) | predicted | error |\n\
         | --- | --- | --- | --- | --- |",
        model.floor,
        UnmapModel::protocol(model.topo).name()
    );
    for (n, value) in &measured {
        let predicted = model.predict(model.topo, *n as usize, kick);
        let error = if *n == fit_n {
            "(fitted)".to_string()
        } else {
            format!("{:.0}%", relative_error(predicted, *value) * 100.0)
        };
        let _ = writeln!(
            out,
            "| {}×{} | {n} | {value:.0} | {predicted:.0} | {error} |",
            vm.1,
            vm.0 / vm.1
        );
    }
    unmap_beyond_the_machine(out, &model, kick);
}

/// Atoll's measured `reduce` unmap latencies: (vm, N) -> values.
fn reduce_points(unmap: &[Record]) -> BTreeMap<(Vm, u64), Vec<f64>> {
    let mut points: BTreeMap<(Vm, u64), Vec<f64>> = BTreeMap::new();
    for r in unmap.iter().filter(|r| text(r, "metric") == "latency_cycles") {
        if text(r, "config") != "reduce" {
            continue;
        }
        let n = number(r, "active_cores").or_else(|| number(r, "cores")).unwrap_or(0.0) as u64;
        if let Some(v) = number(r, "value") {
            points.entry((vm_of(r), n)).or_default().push(v);
        }
    }
    points
}

/// Figure 7's model for one VM: its local floor, its shootdown costs and its topology.
struct UnmapModel {
    floor: f64,
    costs: Costs,
    topo: Topology,
}

impl UnmapModel {
    /// The protocol the SKB picks: unicast within one package, NUMA-aware multicast across.
    fn protocol(topo: Topology) -> Protocol {
        if topo.packages > 1 {
            Protocol::NumaMulticast
        } else {
            Protocol::Unicast
        }
    }

    /// The shootdown costs with each participant's receive grown by `kick`.
    fn with_kick(&self, kick: f64) -> Costs {
        Costs { receive: self.costs.receive + kick, ..self.costs }
    }

    /// The predicted unmap latency at `n` cores of `topo`.
    fn predict(&self, topo: Topology, n: usize, kick: f64) -> f64 {
        self.floor + predict(Self::protocol(topo), topo, n, &self.with_kick(kick))
    }

    /// The kick that makes the prediction at `n` cores meet `value`: the prediction grows
    /// with the kick, so bisect.
    fn fit_kick(&self, n: usize, value: f64) -> f64 {
        let (mut lo, mut hi) = (0.0, 4.0 * value);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if self.predict(self.topo, n, mid) < value {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (lo + hi) / 2.0
    }
}

/// The predicted unmap latency on 8 packages × 8 cores, each protocol.
fn unmap_beyond_the_machine(out: &mut String, model: &UnmapModel, kick: f64) {
    let big = Topology { packages: 8, cores_per_package: 8 };
    let _ = writeln!(
        out,
        "\nPredicted unmap latency on 8 packages × 8 cores, each protocol (cycles; Figure 7's \
         claim: the message-based unmap's line is flat where IPIs sent one by one grow):\n\n\
         | cores | {} |\n| --- |{}",
        Protocol::ALL.map(|p| p.name()).join(" | "),
        " --- |".repeat(Protocol::ALL.len())
    );
    for n in [2, 4, 8, 16, 32, 64] {
        let cells: Vec<String> = Protocol::ALL
            .into_iter()
            .map(|p| format!("{:.0}", model.floor + predict(p, big, n, &model.with_kick(kick))))
            .collect();
        let _ = writeln!(out, "| {n} | {} |", cells.join(" | "));
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(json: &str) -> Record {
        serde_json::from_str(json).expect("a record")
    }

    #[test]
    fn measured_points_get_a_prediction_and_an_error() {
        let records = [
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":4,"sockets":2,"metric":"one_way_cycles","value":1000,"link":"local"}"#,
            ),
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":4,"sockets":2,"metric":"one_way_cycles","value":1500,"link":"remote"}"#,
            ),
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":4,"sockets":2,"active_cores":2,"metric":"latency_cycles","value":2000,"protocol":"unicast"}"#,
            ),
        ];
        let refs: Vec<&Record> = records.iter().collect();
        let mut out = String::new();
        section(&mut out, &refs);
        // Unicast at 2 cores in one package is the local round trip exactly.
        assert!(out.contains("| 2×2 | 2 | unicast | 2000 | 2000 | 0% |"), "{out}");
        assert!(out.contains("1 of 1 measured points are within 25%"), "{out}");
        assert!(out.contains("| 64 |"), "{out}");
    }

    #[test]
    fn a_vm_of_one_core_per_package_is_modelled_from_its_remote_link() {
        let records = [
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":2,"sockets":2,"metric":"one_way_cycles","value":1500,"link":"remote"}"#,
            ),
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":2,"sockets":2,"active_cores":2,"metric":"latency_cycles","value":3000,"protocol":"unicast"}"#,
            ),
        ];
        let refs: Vec<&Record> = records.iter().collect();
        let mut out = String::new();
        section(&mut out, &refs);
        assert!(out.contains("| 2×1 | 2 | unicast | 3000 |"), "{out}");
        assert!(out.contains("1 of 1 measured points"), "{out}");
    }

    #[test]
    fn points_from_an_oversubscribed_vm_are_shown_but_not_counted() {
        let records = [
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":4,"sockets":2,"metric":"one_way_cycles","value":1000,"link":"local"}"#,
            ),
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":4,"sockets":2,"active_cores":2,"metric":"latency_cycles","value":2000,"protocol":"unicast","oversubscribed":true}"#,
            ),
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":4,"sockets":2,"active_cores":4,"metric":"latency_cycles","value":150000,"protocol":"unicast","oversubscribed":true}"#,
            ),
        ];
        let refs: Vec<&Record> = records.iter().collect();
        let mut out = String::new();
        section(&mut out, &refs);
        assert!(out.contains("| 2×2 | 4 (oversubscribed) | unicast | 150000 |"), "{out}");
        assert!(out.contains("0 of 0 measured points are within 25%"), "{out}");
        assert!(out.contains(" 2 more come from VMs with more vCPUs"), "{out}");
        // With a 2-core VM beside it, the extrapolation uses that one's costs.
        let two = [
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":2,"metric":"one_way_cycles","value":1000,"link":"local"}"#,
            ),
            rec(
                r#"{"experiment":"shootdown","system":"atoll","cores":2,"active_cores":2,"metric":"latency_cycles","value":2000,"protocol":"unicast"}"#,
            ),
        ];
        let refs: Vec<&Record> = records.iter().chain(two.iter()).collect();
        let mut out = String::new();
        section(&mut out, &refs);
        assert!(out.contains("1 of 1 measured points are within 25%"), "{out}");
        assert!(out.contains("with the costs of the 2-core VM"), "{out}");
    }

    #[test]
    fn unmap_is_the_floor_plus_the_agreement_with_a_fitted_kick() {
        let shootdown = [rec(
            r#"{"experiment":"shootdown","system":"atoll","cores":4,"metric":"one_way_cycles","value":1000,"link":"local"}"#,
        )];
        let unmap = [
            (1, 5000),
            (2, 20000),
            (3, 24000),
        ]
        .map(|(n, v)| {
            rec(&format!(
                r#"{{"experiment":"unmap","system":"atoll","cores":4,"active_cores":{n},"metric":"latency_cycles","value":{v},"config":"reduce"}}"#
            ))
        });
        let (s, u): (Vec<&Record>, Vec<&Record>) =
            (shootdown.iter().collect(), unmap.iter().collect());
        let mut out = String::new();
        unmap_section(&mut out, &u, &s);
        // The fitted point comes out exactly; the next one is predicted, with its error.
        assert!(out.contains("| 1×4 | 2 | 20000 | 20000 | (fitted) |"), "{out}");
        assert!(out.contains("| 1×4 | 3 | 24000 |"), "{out}");
        assert!(out.contains("| 64 |"), "{out}");
        // Without the shootdown's costs there is no model.
        let mut none = String::new();
        unmap_section(&mut none, &u, &[]);
        assert!(none.is_empty());
    }

    #[test]
    fn nothing_without_measured_costs() {
        let records = [rec(
            r#"{"experiment":"shootdown","system":"atoll","cores":2,"metric":"latency_cycles","value":5,"protocol":"unicast"}"#,
        )];
        let refs: Vec<&Record> = records.iter().collect();
        let mut out = String::new();
        section(&mut out, &refs);
        assert!(out.is_empty());
    }
}
