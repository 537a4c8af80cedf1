//! Which store failures are the database's passing trouble rather than a fact about the task.
//!
//! A connection reset, a restart (`57P01 admin_shutdown`, `57P03 cannot_connect_now`), a pool
//! with no connection free, a serialization failure or a busy SQLite file say nothing about the
//! work: the same statement may succeed a moment later. Callers retry those, or hand the task
//! back to the queue, and never fail a task because of one. Anything else (a constraint broken,
//! corrupt data, a failed migration) is not retried.

use std::future::Future;
use std::time::Duration;

use super::StoreError;

/// How long [`retry_transient`] keeps trying by default: long enough to outlive a database
/// restart of a few seconds, short against a lease.
pub const RETRY_BUDGET: Duration = Duration::from_secs(6);

/// SQLSTATE classes and codes of Postgres that a retry can outlive.
const PG_TRANSIENT_CLASSES: [&str; 1] = ["08"];
const PG_TRANSIENT_CODES: [&str; 7] = [
    "57P01", // admin_shutdown
    "57P02", // crash_shutdown
    "57P03", // cannot_connect_now
    "53300", // too_many_connections
    "40001", // serialization_failure
    "40P01", // deadlock_detected
    "55P03", // lock_not_available
];
/// SQLite primary result codes (the low byte of an extended code): BUSY and LOCKED.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;

impl StoreError {
    /// True when the same operation may well succeed if tried again shortly.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Database(error) => sqlx_transient(error),
            StoreError::Migrate(_)
            | StoreError::IdempotencyConflict { .. }
            | StoreError::Corrupt(_) => false,
        }
    }
}

/// Runs `op` until it succeeds, fails for good, or `budget` is spent, retrying transient
/// failures with backoff (50 ms doubling to 1 s). Only for operations that are safe to repeat:
/// reads, and writes whose second application changes nothing (first write wins).
pub async fn retry_transient<T, F, Fut>(budget: Duration, mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = Duration::from_millis(50);
    loop {
        match op().await {
            Err(error)
                if error.is_transient() && tokio::time::Instant::now() + pause < deadline =>
            {
                tracing::warn!(%error, retry_in_ms = pause.as_millis() as u64, "store fault; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            other => return other,
        }
    }
}

fn sqlx_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let sqlite = db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some();
            db.code().is_some_and(|code| {
                if sqlite {
                    sqlite_code_transient(&code)
                } else {
                    pg_code_transient(&code)
                }
            })
        }
        _ => false,
    }
}

fn pg_code_transient(code: &str) -> bool {
    PG_TRANSIENT_CODES.contains(&code)
        || PG_TRANSIENT_CLASSES
            .iter()
            .any(|class| code.starts_with(class))
}

/// SQLite reports the extended result code; its low byte is the primary code.
fn sqlite_code_transient(code: &str) -> bool {
    code.parse::<i64>().is_ok_and(|number| {
        let primary = number & 0xff;
        primary == SQLITE_BUSY || primary == SQLITE_LOCKED
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_trouble_is_transient_and_data_trouble_is_not() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(StoreError::Database(sqlx::Error::Io(io)).is_transient());
        assert!(StoreError::Database(sqlx::Error::PoolTimedOut).is_transient());
        assert!(!StoreError::Corrupt("bad row".into()).is_transient());
        assert!(!StoreError::Database(sqlx::Error::RowNotFound).is_transient());
        assert!(
            !StoreError::IdempotencyConflict {
                existing_task: uuid::Uuid::nil()
            }
            .is_transient()
        );
    }

    #[tokio::test]
    async fn transient_failures_are_retried_and_permanent_ones_are_not() {
        let mut calls = 0;
        let result = retry_transient(Duration::from_secs(5), || {
            calls += 1;
            let attempt = calls;
            async move {
                if attempt < 3 {
                    Err(StoreError::Database(sqlx::Error::PoolTimedOut))
                } else {
                    Ok(attempt)
                }
            }
        })
        .await;
        assert_eq!(result.ok(), Some(3));
        let mut calls = 0;
        let result: Result<(), _> = retry_transient(Duration::from_secs(5), || {
            calls += 1;
            async { Err(StoreError::Corrupt("bad".into())) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, 1);
    }

    #[test]
    fn codes_of_restarts_busy_files_and_conflicts_are_transient() {
        for code in [
            "57P01", "57P03", "08006", "08001", "40001", "40P01", "53300",
        ] {
            assert!(pg_code_transient(code), "{code}");
        }
        for code in ["23505", "42P01", "22P02"] {
            assert!(!pg_code_transient(code), "{code}");
        }
        for code in ["5", "517", "6", "261"] {
            assert!(sqlite_code_transient(code), "{code}");
        }
        for code in ["19", "2067", "1"] {
            assert!(!sqlite_code_transient(code), "{code}");
        }
    }
}
