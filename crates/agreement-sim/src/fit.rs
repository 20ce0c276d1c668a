//! From what the kernel measures to the model's [`Costs`], and how far a prediction is
//! from a measurement.
//!
//! The kernel's SKB measures a URPC round trip between two cores of one package, and
//! between two packages when there are several (Multikernel §4.9: "online measurement
//! (such as URPC communication latency ...)"). A round trip between two cores is exactly
//! the model's unicast operation at n = 2: `send + transit + receive` there and the same
//! back. One number cannot be split into three by itself, so unless the kernel also
//! measured `send` and `receive`, the split is the one the paper's Table 2 implies for
//! the 8×4-core AMD machine (below).

use crate::Costs;

/// One-way URPC latency between two cores sharing a cache on the paper's 8×4-core AMD
/// machine (Multikernel Table 2, "shared": 538 cycles).
pub const PAPER_ONE_WAY_LOCAL: f64 = 538.0;

/// One-way URPC latency one HyperTransport hop away on the same machine (Multikernel
/// Table 2, "one-hop": 613 cycles).
pub const PAPER_ONE_WAY_REMOTE: f64 = 613.0;

/// URPC throughput between two cores sharing a cache on the same machine (Multikernel
/// Table 2: 2.77 messages per 1000 cycles). Its inverse is the cycles a message keeps the
/// two ends busy, `send + receive`, when messages are pipelined.
pub const PAPER_MSGS_PER_KCYCLE: f64 = 2.77;

/// What the kernel measured between two cores, in cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Round trip (message and reply) between two cores of one package.
    pub round_trip_local: f64,
    /// Round trip between cores of two packages, if the machine has several.
    pub round_trip_remote: Option<f64>,
    /// Sender's cost per message, if measured (e.g. from a burst of sends).
    pub send: Option<f64>,
    /// Receiver's cost per message, if measured.
    pub receive: Option<f64>,
}

/// Fits [`Costs`] from measurements the kernel makes at 2 cores.
///
/// - One-way local latency `L` is half the local round trip (the reply costs the same).
/// - `send` and `receive` are the measured ones, else each is half of the busy time per
///   message the paper's Table 2 implies: `(1000 / 2.77) / 2` cycles of every 538, i.e.
///   `0.336 * L`. Should they add up to more than `L`, both are scaled down to fit.
/// - `transit_local = L - send - receive`, so that [`crate::predict`] of unicast at
///   n = 2 within a package gives back the round trip exactly.
/// - `transit_remote` likewise from the remote round trip when measured (not below 0);
///   else extrapolated with Table 2's one-hop penalty: `transit_local + L * (613/538 - 1)`.
/// - `shared_line_per_reader`: each reader of the broadcast line pulls a copy from the
///   writer's cache in turn (§5.1: "the data crosses the interconnect N times"), so one
///   reader holds the line's home for one line transfer: `transit_remote` when a remote
///   round trip was measured (the machine has several packages), else `transit_local`.
///
/// Negative or non-finite measurements count as 0.
pub fn costs_from_measurements(m: &Measured) -> Costs {
    let ok = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    let one_way = ok(m.round_trip_local) / 2.0;
    let default_part = one_way * (1000.0 / PAPER_MSGS_PER_KCYCLE) / 2.0 / PAPER_ONE_WAY_LOCAL;
    let mut send = m.send.map_or(default_part, ok);
    let mut receive = m.receive.map_or(default_part, ok);
    if send + receive > one_way {
        let scale = one_way / (send + receive);
        send *= scale;
        receive *= scale;
    }
    let transit_local = (one_way - send - receive).max(0.0);
    let (transit_remote, shared_line_per_reader) = match m.round_trip_remote {
        Some(rt) => {
            let remote = (ok(rt) / 2.0 - send - receive).max(0.0);
            (remote, remote)
        }
        None => {
            let hop = one_way * (PAPER_ONE_WAY_REMOTE / PAPER_ONE_WAY_LOCAL - 1.0);
            (transit_local + hop, transit_local)
        }
    };
    Costs { send, transit_local, transit_remote, receive, shared_line_per_reader }
}

/// The costs of the paper's 8×4-core AMD machine (Table 2: 538 cycles one way within a
/// package, 613 one hop away), fitted as [`costs_from_measurements`] does: the binary's
/// default.
pub fn paper_costs() -> Costs {
    costs_from_measurements(&Measured {
        round_trip_local: 2.0 * PAPER_ONE_WAY_LOCAL,
        round_trip_remote: Some(2.0 * PAPER_ONE_WAY_REMOTE),
        send: None,
        receive: None,
    })
}

/// One point predicted against one measured: relative error `|predicted - measured| /
/// |measured|` (0 when both are 0, infinite when only the measurement is 0, NaN if
/// either is NaN).
pub fn relative_error(predicted: f64, measured: f64) -> f64 {
    if measured == 0.0 {
        return if predicted == 0.0 {
            0.0
        } else if predicted.is_nan() {
            f64::NAN
        } else {
            f64::INFINITY
        };
    }
    (predicted - measured).abs() / measured.abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_split_is_about_a_third_each() {
        let c = paper_costs();
        assert!((c.send - 180.5).abs() < 1.0, "{c:?}");
        assert_eq!(c.send, c.receive);
        assert!((c.send + c.transit_local + c.receive - 538.0).abs() < 1e-9);
        assert!((c.send + c.transit_remote + c.receive - 613.0).abs() < 1e-9);
        assert_eq!(c.shared_line_per_reader, c.transit_remote);
    }

    #[test]
    fn measured_send_and_receive_are_used_and_scaled_to_fit() {
        let m = Measured {
            round_trip_local: 1000.0,
            round_trip_remote: None,
            send: Some(100.0),
            receive: Some(50.0),
        };
        let c = costs_from_measurements(&m);
        assert_eq!((c.send, c.receive, c.transit_local), (100.0, 50.0, 350.0));
        assert_eq!(c.shared_line_per_reader, c.transit_local);
        assert!(c.transit_remote > c.transit_local);
        let too_big = Measured { send: Some(600.0), receive: Some(400.0), ..m };
        let c = costs_from_measurements(&too_big);
        assert!((c.send - 300.0).abs() < 1e-9 && (c.receive - 200.0).abs() < 1e-9);
        assert_eq!(c.transit_local, 0.0);
    }

    #[test]
    fn garbage_measurements_give_zero_costs_not_nan() {
        let m = Measured {
            round_trip_local: f64::NAN,
            round_trip_remote: Some(-3.0),
            send: Some(f64::INFINITY),
            receive: None,
        };
        let c = costs_from_measurements(&m);
        for x in [c.send, c.transit_local, c.transit_remote, c.receive, c.shared_line_per_reader] {
            assert_eq!(x, 0.0);
        }
    }

    #[test]
    fn relative_error_is_symmetric_in_sign_and_handles_zero() {
        assert_eq!(relative_error(110.0, 100.0), 0.1);
        assert_eq!(relative_error(90.0, 100.0), 0.1);
        assert_eq!(relative_error(0.0, 0.0), 0.0);
        assert_eq!(relative_error(1.0, 0.0), f64::INFINITY);
        assert!(relative_error(f64::NAN, 1.0).is_nan());
    }
}
