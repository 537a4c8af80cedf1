//! Timestamps as the API writes them: RFC 3339 in UTC with exactly three fraction digits
//! (`2026-12-06T07:10:11.120Z`), whichever backend stored them. Postgres keeps microseconds and
//! SQLite milliseconds, and chrono's default writes only the digits that are not zero, so
//! without this one task could show three precisions. Reading accepts any RFC 3339 timestamp.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serializer;

/// `serialize_with` for a timestamp.
pub fn millis<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// `serialize_with` for an optional timestamp (`null` when absent).
pub fn millis_opt<S: Serializer>(
    at: &Option<DateTime<Utc>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => millis(at, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde::Serialize;

    #[derive(Serialize)]
    struct At {
        #[serde(serialize_with = "super::millis")]
        at: chrono::DateTime<chrono::Utc>,
        #[serde(serialize_with = "super::millis_opt")]
        until: Option<chrono::DateTime<chrono::Utc>>,
    }

    #[test]
    fn every_timestamp_has_three_fraction_digits() {
        let whole = chrono::Utc.timestamp_opt(1_800_000_000, 0).unwrap();
        let micro = chrono::Utc
            .timestamp_opt(1_800_000_000, 123_456_000)
            .unwrap();
        let text = serde_json::to_string(&At {
            at: whole,
            until: Some(micro),
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"at":"2027-01-15T08:00:00.000Z","until":"2027-01-15T08:00:00.123Z"}"#
        );
        let none = serde_json::to_string(&At {
            at: whole,
            until: None,
        })
        .unwrap();
        assert!(none.ends_with(r#""until":null}"#), "{none}");
    }
}
