//! How long a coordinator waits before retrying an aborted 2PC operation. Participants vote
//! No instead of waiting (see [`crate::Participant`]), so two coordinators whose operations
//! conflict can abort each other; if both retried at once they could keep colliding. The
//! backoff separates them: it doubles with every attempt, and for one attempt no two cores
//! wait the same time.

/// The shortest wait, in cycles: a few URPC round trips (Multikernel §4.6, Table 2: about
/// 450-620 cycles one way), the order of one uncontended 2PC on a few cores.
pub const BACKOFF_BASE: u64 = 4096;

/// The wait stops doubling after this many attempts (at `BACKOFF_BASE << 10`, about 4M
/// cycles, a couple of milliseconds), so a retry is never put off indefinitely.
pub const BACKOFF_MAX_SHIFT: u32 = 10;

/// Cycles core `core` waits before attempt number `attempt` (counting from 0 for the first
/// retry) of an aborted operation.
///
/// The wait lies in the window `[W, 2W)` with `W = BACKOFF_BASE << min(attempt,
/// BACKOFF_MAX_SHIFT)`, so it grows strictly with `attempt` until the cap. Within the window,
/// core `c` takes slot `bitreverse6(c % 64) ^ (attempt * 37 % 64)` of 64 equal slots:
/// - for one attempt, cores that differ modulo 64 get different slots (XOR with a common
///   value is a permutation), so two colliding cores do not retry together;
/// - bit reversal puts neighbouring cores (often the same package, so likely to collide)
///   half a window apart rather than one slot apart;
/// - the XOR changes with the attempt, so no core always goes first and starves the other.
pub fn retry_backoff(core: usize, attempt: u32) -> u64 {
    let window = BACKOFF_BASE << attempt.min(BACKOFF_MAX_SHIFT);
    let spread = (core % 64) as u64;
    let spread = spread.reverse_bits() >> (64 - 6); // bit-reverse the low six bits
    let slot = spread ^ (u64::from(attempt).wrapping_mul(37) % 64);
    window + slot * (window / 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_attempt_until_the_cap() {
        for core in [0, 1, 7, 63] {
            let mut last = 0;
            for attempt in 0..=BACKOFF_MAX_SHIFT {
                let wait = retry_backoff(core, attempt);
                assert!(wait > last, "core {core} attempt {attempt}: {wait} <= {last}");
                last = wait;
            }
            let cap = BACKOFF_BASE << BACKOFF_MAX_SHIFT;
            assert!(retry_backoff(core, u32::MAX) < 2 * cap);
            assert!(retry_backoff(core, u32::MAX) >= cap);
        }
    }

    #[test]
    fn cores_differ_for_every_attempt() {
        for attempt in 0..20 {
            let mut seen = [false; 64];
            for core in 0..64 {
                let slot = (retry_backoff(core, attempt) - (BACKOFF_BASE << attempt.min(10)))
                    / ((BACKOFF_BASE << attempt.min(10)) / 64);
                assert!(!seen[slot as usize], "attempt {attempt}: core {core} shares a slot");
                seen[slot as usize] = true;
            }
        }
    }

    #[test]
    fn neighbours_are_far_apart() {
        let w = BACKOFF_BASE;
        assert_eq!(retry_backoff(0, 0).abs_diff(retry_backoff(1, 0)), w / 2);
    }

    #[test]
    fn first_core_does_not_always_go_first() {
        let first = (0..8).filter(|&a| retry_backoff(0, a) < retry_backoff(1, a)).count();
        assert!(first > 0 && first < 8);
    }
}
