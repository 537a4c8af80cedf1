//! Time as a dependency.
//!
//! Every lease, heartbeat and timestamp cairn writes is computed from a [`Clock`] handed in by
//! the caller, never from the database's `now()`. Production uses [`SystemClock`]; tests use
//! [`ManualClock`] to expire leases deterministically instead of sleeping.

use chrono::{DateTime, Duration, SubsecRound, Utc};
use std::sync::Mutex;

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    // The one place that reads the wall clock. Whole milliseconds: what SQLite keeps, so both
    // backends store, order and return the same instants.
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> DateTime<Utc> {
        Utc::now().trunc_subsecs(3)
    }
}

/// A clock that only moves when told to: for lease-expiry tests without sleeps.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now += by;
    }

    pub fn set(&self, to: DateTime<Utc>) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
