//! Per-tenant spend caps: how much money (micro-units of the price table's currency) one tenant's
//! tasks may spend in one period of the calendar, UTC. Pure: the periods' bounds and the caps;
//! the store keeps the spend per tenant and hour, the API refuses a submit of a tenant at its
//! cap, the claim passes its queued tasks over, and each call's reservation is checked against
//! what the period has left.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A period of the calendar, in UTC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SpendPeriod {
    Hour,
    #[default]
    Day,
    Month,
}

impl SpendPeriod {
    pub fn as_str(self) -> &'static str {
        match self {
            SpendPeriod::Hour => "hour",
            SpendPeriod::Day => "day",
            SpendPeriod::Month => "month",
        }
    }

    /// The start of the period `at` falls in.
    pub fn start(self, at: DateTime<Utc>) -> DateTime<Utc> {
        let hour = at
            .with_nanosecond(0)
            .and_then(|t| t.with_second(0))
            .and_then(|t| t.with_minute(0))
            .unwrap_or(at);
        match self {
            SpendPeriod::Hour => hour,
            SpendPeriod::Day => hour.with_hour(0).unwrap_or(hour),
            SpendPeriod::Month => Utc
                .with_ymd_and_hms(at.year(), at.month(), 1, 0, 0, 0)
                .single()
                .unwrap_or(hour),
        }
    }

    /// The start of the period after the one `at` falls in.
    pub fn end(self, at: DateTime<Utc>) -> DateTime<Utc> {
        let start = self.start(at);
        match self {
            SpendPeriod::Hour => start + Duration::hours(1),
            SpendPeriod::Day => start + Duration::days(1),
            SpendPeriod::Month => {
                let (year, month) = if start.month() == 12 {
                    (start.year() + 1, 1)
                } else {
                    (start.year(), start.month() + 1)
                };
                Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0)
                    .single()
                    .unwrap_or(start + Duration::days(31))
            }
        }
    }

    /// The start of the period `back` periods before the one `at` falls in.
    pub fn start_back(self, at: DateTime<Utc>, back: u32) -> DateTime<Utc> {
        let mut start = self.start(at);
        for _ in 0..back {
            start = self.start(start - Duration::seconds(1));
        }
        start
    }
}

/// The operator's caps, resolved to micro-units. Empty: no tenant is capped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpendCaps {
    pub period: SpendPeriod,
    /// Every tenant's cap, unless it has its own.
    pub default: Option<u64>,
    /// Tenants with a cap of their own.
    pub tenants: BTreeMap<String, u64>,
}

impl SpendCaps {
    /// The cap of `tenant`, if any.
    pub fn cap(&self, tenant: &str) -> Option<u64> {
        self.tenants.get(tenant).copied().or(self.default)
    }

    /// Whether any tenant is capped.
    pub fn any(&self) -> bool {
        self.default.is_some() || !self.tenants.is_empty()
    }

    /// What `tenant` may still spend in the period, given what it spent: `None` when uncapped.
    pub fn room(&self, tenant: &str, spent: u64) -> Option<u64> {
        self.cap(tenant).map(|cap| cap.saturating_sub(spent))
    }

    /// Whether `tenant`, having spent `spent` this period, has reached its cap.
    pub fn reached(&self, tenant: &str, spent: u64) -> bool {
        self.room(tenant, spent) == Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("a time")
            .with_timezone(&Utc)
    }

    #[test]
    fn periods_are_calendar_periods_in_utc() {
        let now = at("2026-12-31T23:59:59.500Z");
        assert_eq!(SpendPeriod::Hour.start(now), at("2026-12-31T23:00:00Z"));
        assert_eq!(SpendPeriod::Hour.end(now), at("2027-01-01T00:00:00Z"));
        assert_eq!(SpendPeriod::Day.start(now), at("2026-12-31T00:00:00Z"));
        assert_eq!(SpendPeriod::Day.end(now), at("2027-01-01T00:00:00Z"));
        assert_eq!(SpendPeriod::Month.start(now), at("2026-12-01T00:00:00Z"));
        assert_eq!(SpendPeriod::Month.end(now), at("2027-01-01T00:00:00Z"));
        let feb = at("2028-02-29T12:00:00Z");
        assert_eq!(SpendPeriod::Month.end(feb), at("2028-03-01T00:00:00Z"));
        assert_eq!(
            SpendPeriod::Month.start_back(feb, 2),
            at("2027-12-01T00:00:00Z")
        );
        assert_eq!(
            SpendPeriod::Day.start_back(feb, 1),
            at("2028-02-28T00:00:00Z")
        );
        // The start of a period is in it.
        let start = SpendPeriod::Day.start(now);
        assert_eq!(SpendPeriod::Day.start(start), start);
    }

    #[test]
    fn a_tenant_of_its_own_overrides_the_default() {
        let caps = SpendCaps {
            period: SpendPeriod::Day,
            default: Some(100),
            tenants: BTreeMap::from([("big".to_string(), 1_000)]),
        };
        assert_eq!(caps.cap("acme"), Some(100));
        assert_eq!(caps.cap("big"), Some(1_000));
        assert_eq!(caps.room("acme", 40), Some(60));
        assert_eq!(caps.room("acme", 400), Some(0));
        assert!(caps.reached("acme", 100));
        assert!(!caps.reached("big", 100));
        assert!(!SpendCaps::default().any());
        assert_eq!(SpendCaps::default().room("acme", 10), None);
    }
}
