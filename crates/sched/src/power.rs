//! Scaled computing power (AMPS §2.2): a core's computing power divided by the slowest
//! core's, so the slowest core has `P = 1`. The paper derives it from frequency: a core `F`
//! times faster than the slowest gets `P = F × S`, with `S = 0.85` (§3) because memory does
//! not speed up with the core. Atoll measures each core's speed at boot (the SKB's
//! `compute_speed`, units of fixed work per millisecond), which already includes the
//! memory's effect, so [`Power::from_measured`] takes the measured ratio as it is, and
//! [`Power::from_frequencies`] applies the paper's `S` where only a frequency ratio is known.

use alloc::vec::Vec;

/// `P = 1`, in the thousandths every power is kept in.
pub const POWER_ONE: u64 = 1000;

/// The paper's scaling factor `S = 0.85`, in thousandths (§3).
pub const PAPER_S: u64 = 850;

/// A core's scaled computing power in thousandths (`1000` is the slowest core's `P = 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Power(pub u64);

impl Power {
    /// The power of the slowest core, `P = 1`.
    pub const ONE: Power = Power(POWER_ONE);

    /// Scaled powers from measured speeds (any unit, larger is faster): each core's speed
    /// over the slowest core's. A core with no measurement (`None` or 0) counts as the
    /// slowest (`P = 1`), so it is never preferred on a guess. An empty list gives none.
    pub fn from_measured(speeds: &[Option<u64>]) -> Vec<Power> {
        let known = speeds.iter().filter_map(|s| *s).filter(|&s| s > 0);
        let Some(slowest) = known.min() else {
            return speeds.iter().map(|_| Power::ONE).collect();
        };
        speeds
            .iter()
            .map(|s| match s {
                Some(s) if *s > 0 => Power((s * POWER_ONE / slowest).max(POWER_ONE)),
                _ => Power::ONE,
            })
            .collect()
    }

    /// This power rounded to the nearest eighth (at least 1): speeds measured within
    /// noise of each other become equal, and an emulated duty cycle (in eighths) comes out
    /// as itself.
    pub fn quantized(self) -> Power {
        let eighth = POWER_ONE / 8;
        Power(((self.0 + eighth / 2) / eighth * eighth).max(POWER_ONE))
    }

    /// Scaled powers from frequencies, as the paper computes them (§2.2, §3): the slowest
    /// core gets `P = 1`, a core `F` times faster `P = F × s` (`s` in thousandths, e.g.
    /// [`PAPER_S`]), but never below 1.
    pub fn from_frequencies(mhz: &[u64], s: u64) -> Vec<Power> {
        let Some(&slowest) = mhz.iter().filter(|&&f| f > 0).min() else {
            return mhz.iter().map(|_| Power::ONE).collect();
        };
        mhz.iter()
            .map(
                |&f| {
                    if f <= slowest {
                        Power::ONE
                    } else {
                        Power((f * s / slowest).max(POWER_ONE))
                    }
                },
            )
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_core_has_power_one() {
        let p = Power::from_measured(&[Some(200), Some(100), None, Some(400)]);
        assert_eq!(p, [Power(2000), Power(1000), Power(1000), Power(4000)]);
        assert_eq!(Power::from_measured(&[None, None]), [Power::ONE, Power::ONE]);
    }

    #[test]
    fn quantized_powers_round_to_eighths() {
        assert_eq!(Power(1050).quantized(), Power(1000));
        assert_eq!(Power(1070).quantized(), Power(1125));
        assert_eq!(Power(1940).quantized(), Power(2000));
        assert_eq!(Power(2879).quantized(), Power(2875));
        assert_eq!(Power(900).quantized(), Power(1000));
    }

    #[test]
    fn frequencies_are_scaled_by_s_as_in_the_paper() {
        // Twice the frequency: P = 2 × 0.85 = 1.7.
        let p = Power::from_frequencies(&[1600, 3200, 1600], PAPER_S);
        assert_eq!(p, [Power(1000), Power(1700), Power(1000)]);
        // A core barely faster is not made slower than the slowest by S.
        assert_eq!(Power::from_frequencies(&[1000, 1100], PAPER_S)[1], Power(1000));
    }
}
