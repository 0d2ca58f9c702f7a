//! When to try an attempt again, and how long to wait first.

use std::time::Duration;

use super::supervisor::AttemptResult;
use crate::store::Outcome;

/// Backoff before attempt `n + 1` after `n` failed ones:
/// `min(base * 2^(n-1), max)` plus up to 20% jitter.
pub(crate) fn backoff(n: u32, base: Duration, max: Duration, jitter_seed: u64) -> Duration {
    let exp = base.saturating_mul(1u32 << n.saturating_sub(1).min(20));
    let d = exp.min(max);
    // A small deterministic-per-call jitter (no RNG dependency needed).
    let frac = (jitter_seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44) as f64 / (1u64 << 20) as f64;
    d + d.mul_f64(0.2 * frac)
}

/// Whether a failed attempt may be retried, and the wait before it.
pub(crate) fn next_wait(
    result: &AttemptResult,
    failed_attempts: u32,
    base: Duration,
    max: Duration,
    now_ms: u64,
) -> Option<Duration> {
    if result.permanent || matches!(result.outcome, Outcome::Succeeded | Outcome::Cancelled) {
        return None;
    }
    let wait = backoff(
        failed_attempts,
        base,
        max,
        result.started_ms ^ u64::from(failed_attempts),
    );
    match result.rate_limited {
        // A rate limit with a reset time: wait until then (at least the
        // backoff), capped at an hour.
        Some(Some(lifts)) if lifts > now_ms => {
            Some(Duration::from_millis((lifts - now_ms).min(3_600_000)).max(wait))
        }
        _ => Some(wait),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(rate_limited: Option<Option<u64>>, permanent: bool) -> AttemptResult {
        AttemptResult {
            rate_limited,
            permanent,
            ..AttemptResult::new(1)
        }
    }

    #[test]
    fn rate_limits_wait_for_the_reset_and_permanent_failures_never_retry() {
        let b = Duration::from_secs(2);
        let m = Duration::from_secs(60);
        let now = 1_000_000;
        // A reset 90 s from now beats the 2 s backoff.
        assert_eq!(
            next_wait(&failed(Some(Some(now + 90_000)), false), 1, b, m, now),
            Some(Duration::from_secs(90))
        );
        // A reset sooner than the backoff: the backoff.
        let w = next_wait(&failed(Some(Some(now + 500)), false), 1, b, m, now).unwrap();
        assert!(w >= b && w <= b.mul_f64(1.2), "{w:?}");
        // A reset days away waits at most an hour.
        assert_eq!(
            next_wait(&failed(Some(Some(now + 86_400_000)), false), 1, b, m, now),
            Some(Duration::from_secs(3600))
        );
        // A reset in the past, or none given: the backoff.
        for r in [Some(Some(now - 1)), Some(None)] {
            let w = next_wait(&failed(r, false), 1, b, m, now).unwrap();
            assert!(w >= b && w <= b.mul_f64(1.2), "{w:?}");
        }
        // Missing binaries and weakened rules are never retried.
        assert_eq!(next_wait(&failed(None, true), 1, b, m, now), None);
    }

    #[test]
    fn exponential_and_capped() {
        let b = Duration::from_millis(100);
        let m = Duration::from_secs(1);
        let d1 = backoff(1, b, m, 0);
        let d3 = backoff(3, b, m, 0);
        let d9 = backoff(9, b, m, 0);
        assert_eq!(d1, Duration::from_millis(100));
        assert_eq!(d3, Duration::from_millis(400));
        assert_eq!(d9, Duration::from_secs(1));
        let j = backoff(2, b, m, 12345);
        assert!(j >= Duration::from_millis(200) && j <= Duration::from_millis(240));
    }
}
