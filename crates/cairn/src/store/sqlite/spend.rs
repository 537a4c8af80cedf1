//! The tenants' spend per hour (`tenant_spend`, kept by [`super::commit`]).

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::SqliteStore;
use super::rows::{from_millis, millis};
use crate::store::{SpendHour, StoreError};

/// One hour in milliseconds: the spend's bucket.
pub(super) const HOUR_MS: i64 = 3_600_000;

impl SqliteStore {
    pub(super) async fn spend_rows(
        &self,
        tenant_id: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<SpendHour>, StoreError> {
        let since = millis(since);
        let rows = sqlx::query(
            "SELECT tenant_id, hour, cost, estimated_cost FROM tenant_spend \
             WHERE hour >= ?1 AND (?2 IS NULL OR tenant_id = ?2) \
             ORDER BY hour, tenant_id",
        )
        .bind(since - since.rem_euclid(HOUR_MS))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let cost: i64 = row.try_get("cost")?;
                let estimated: i64 = row.try_get("estimated_cost")?;
                Ok(SpendHour {
                    tenant_id: row.try_get("tenant_id")?,
                    hour: from_millis(row.try_get("hour")?)?,
                    cost: u64::try_from(cost).unwrap_or(0),
                    estimated_cost: u64::try_from(estimated).unwrap_or(0),
                })
            })
            .collect()
    }

    pub(super) async fn spend_wait_rows(
        &self,
        tenant_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant_id, max(not_before) AS until FROM tasks \
             WHERE status = 'queued' AND not_before > ?1 AND (?2 IS NULL OR tenant_id = ?2) \
             GROUP BY tenant_id ORDER BY tenant_id",
        )
        .bind(millis(now))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("tenant_id")?,
                    from_millis(row.try_get("until")?)?,
                ))
            })
            .collect()
    }
}
