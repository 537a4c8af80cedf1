//! Bounded retries with jittered exponential backoff, honouring `Retry-After`.
//!
//! The bound is on HTTP requests per logical call (`max_attempts`), so a failing server costs a
//! known, small number of requests. A server's `Retry-After` replaces the computed backoff when
//! it is longer; one longer than `max_retry_after` ends the call at once (waiting minutes inside
//! a worker would hold its lease hostage), leaving the decision to the engine.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// HTTP requests per call, the first included. 1 disables retries.
    pub max_attempts: u32,
    /// Backoff before the second request; doubled for each further one.
    pub base_delay: Duration,
    /// No computed backoff exceeds this.
    pub max_delay: Duration,
    /// The longest `Retry-After` the client will wait for.
    pub max_retry_after: Duration,
    /// Per-request timeout (connect, send and the whole body).
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            timeout: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The backoff before request number `next_attempt` (2 for the first retry): exponential,
    /// with "equal jitter" (half fixed, half random) so many workers do not retry in lockstep.
    pub fn backoff(&self, next_attempt: u32) -> Duration {
        let exponent = next_attempt.saturating_sub(2).min(20);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        let half = full / 2;
        let jitter_ms = fastrand::u64(0..=half.as_millis() as u64);
        half + Duration::from_millis(jitter_ms)
    }

    /// The wait before the next request: the backoff, or the server's `Retry-After` if longer.
    /// `None` when the server asks for longer than `max_retry_after`.
    pub fn wait(&self, next_attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        let backoff = self.backoff(next_attempt);
        match retry_after {
            Some(asked) if asked > self.max_retry_after => None,
            Some(asked) => Some(asked.max(backoff)),
            None => Some(backoff),
        }
    }
}

/// Parses a `Retry-After` value: delay-seconds, or an HTTP date (relative to `now`).
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>()
        && seconds.is_finite()
        && seconds >= 0.0
    {
        return Some(Duration::from_secs_f64(seconds));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let delta = date.with_timezone(&chrono::Utc) - now;
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn backoff_grows_is_capped_and_jittered_within_bounds() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        for _ in 0..50 {
            let first = policy.backoff(2);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let second = policy.backoff(3);
            assert!(second >= Duration::from_millis(100) && second <= Duration::from_millis(200));
            let capped = policy.backoff(30);
            assert!(capped >= Duration::from_millis(175) && capped <= Duration::from_millis(350));
        }
    }

    #[test]
    fn retry_after_wins_when_longer_and_is_bounded() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(10),
            max_retry_after: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        assert_eq!(
            policy.wait(2, Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(policy.wait(2, Some(Duration::from_secs(6))), None);
        assert!(
            policy
                .wait(2, None)
                .is_some_and(|d| d <= Duration::from_millis(10))
        );
    }

    #[test]
    fn retry_after_parses_seconds_and_dates() {
        let now = chrono::Utc
            .with_ymd_and_hms(2015, 10, 21, 7, 28, 0)
            .unwrap();
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after("0.5", now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
