//! The tenants' spend per hour (`tenant_spend`, kept by [`super::commit`]).

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row};

use crate::store::{SpendHour, StoreError};

pub(super) async fn spend(
    pool: &PgPool,
    tenant_id: Option<&str>,
    since: DateTime<Utc>,
) -> Result<Vec<SpendHour>, StoreError> {
    let rows = sqlx::query(
        "SELECT tenant_id, hour, cost, estimated_cost FROM tenant_spend \
         WHERE hour >= date_trunc('hour', $1::timestamptz, 'UTC') \
             AND ($2::text IS NULL OR tenant_id = $2) \
         ORDER BY hour, tenant_id",
    )
    .bind(since)
    .bind(tenant_id)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            let cost: i64 = row.try_get("cost")?;
            let estimated: i64 = row.try_get("estimated_cost")?;
            Ok(SpendHour {
                tenant_id: row.try_get("tenant_id")?,
                hour: row.try_get("hour")?,
                cost: u64::try_from(cost).unwrap_or(0),
                estimated_cost: u64::try_from(estimated).unwrap_or(0),
            })
        })
        .collect()
}

pub(super) async fn spend_waits(
    pool: &PgPool,
    tenant_id: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
    let rows = sqlx::query(
        "SELECT tenant_id, max(not_before) AS until FROM tasks \
         WHERE status = 'queued' AND not_before > $1 AND ($2::text IS NULL OR tenant_id = $2) \
         GROUP BY tenant_id ORDER BY tenant_id",
    )
    .bind(now)
    .bind(tenant_id)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| Ok((row.try_get("tenant_id")?, row.try_get("until")?)))
        .collect()
}
