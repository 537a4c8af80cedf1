//! The spend caps as the claim sees them: a tenant that has spent its cap for the period keeps
//! its queued tasks queued until the period ends; a task stopped before a call its tenant's
//! period could not cover is handed back, not to be claimed before the period's end, and while
//! it waits its tenant's other queued tasks wait too (each would stop at its first call).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::params::PoolParams;
use crate::domain::event::{NewEvent, kinds};
use crate::domain::task::{TaskId, TaskStatus};
use crate::store::{Change, ClaimParams, Claimed, StoreError};

/// The tenants at their spend cap now, or with a task waiting for the period's end: passed
/// over by the claim.
pub(super) async fn at_cap(params: &PoolParams) -> Result<Vec<String>, StoreError> {
    let caps = &params.spend_caps;
    if !caps.any() {
        return Ok(Vec::new());
    }
    let now = params.clock.now();
    let mut spent: BTreeMap<String, u64> = BTreeMap::new();
    for hour in params.store.spend(None, caps.period.start(now)).await? {
        let total = spent.entry(hour.tenant_id).or_default();
        *total = total.saturating_add(hour.cost);
    }
    let mut tenants: BTreeSet<String> = spent
        .into_iter()
        .filter(|(tenant, spent)| caps.reached(tenant, *spent))
        .map(|(tenant, _)| tenant)
        .collect();
    for (tenant, _) in params.store.spend_waits(None, now).await? {
        tenants.insert(tenant);
    }
    Ok(tenants.into_iter().collect())
}

/// Claims the oldest task the caps allow (and the per-tenant running cap).
pub(super) async fn claim(
    params: &PoolParams,
    lease_ttl: chrono::Duration,
) -> Result<Option<Claimed>, StoreError> {
    let at_cap = at_cap(params).await?;
    params
        .store
        .claim(ClaimParams {
            worker_id: &params.worker_id,
            now: params.clock.now(),
            lease_ttl,
            max_running_per_tenant: params.max_running_per_tenant,
            passed_over: &at_cap,
        })
        .await
}

/// The release of a task stopped before a call its tenant's period could not cover: queued,
/// not to be claimed before `until`, the period's end.
pub(super) fn deferred(params: &PoolParams, task_id: TaskId, until: DateTime<Utc>) -> Change {
    tracing::info!(%task_id, %until, "the tenant's spend cap is reached; the task waits");
    let data = serde_json::json!({
        "worker_id": params.worker_id,
        "reason": "spend_cap",
        "not_before": until,
    });
    Change {
        status: Some(TaskStatus::Queued),
        release: true,
        not_before: Some(until),
        events: vec![NewEvent::new(kinds::TASK_RELEASED, data)],
        ..Change::default()
    }
}
