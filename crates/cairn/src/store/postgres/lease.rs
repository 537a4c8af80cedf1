//! Leases: claim, heartbeat and the reaper.
//!
//! Claim (without a per-tenant cap) and reap are each a single statement (autocommit), so the
//! row change and its event commit together in one round trip; their hints go out after it. A
//! capped claim is a short transaction instead (see [`claim_capped`]). `FOR UPDATE SKIP LOCKED`
//! lets any number of workers on any number of replicas claim at once: each skips rows another
//! claimer has locked, and a row that stopped being `queued` while we waited is re-checked and
//! skipped.

use chrono::{DateTime, Duration, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};

use super::outbox::Outbox;
use super::rows::{self, task_columns};
use crate::domain::event::kinds;
use crate::domain::task::{Lease, TaskId};
use crate::store::claim::tenant_key;
use crate::store::rules;
use crate::store::{ClaimParams, Claimed, LeaseStatus, StoreError, Wakeup};

/// The first key of the per-tenant claim locks (`pg_advisory_xact_lock(int, int)`), so they
/// cannot meet another use of two-key advisory locks.
const TENANT_LOCK_SPACE: i32 = 0x6361_6972; // "cair"

/// The claim's tail, shared by both paths: given a CTE `picked` naming one task id, mark it
/// running under a new lease and log `task.claimed`, returning the task, its checkpoint and fence.
/// `$1` worker id, `$2` now, `$3` lease expiry, `$4` the event kind.
macro_rules! claim_picked {
    ($cond:literal) => {
        concat!(
            "claimed AS ( \
                UPDATE tasks t SET status = 'running', claimed_by = $1, lease_expires_at = $3, \
                    fence = t.fence + 1, attempts = t.attempts + 1, last_seq = t.last_seq + 1, \
                    started_at = COALESCE(t.started_at, $2), updated_at = $2 \
                FROM picked WHERE t.id = picked.id ",
            $cond,
            " RETURNING t.* \
             ), logged AS ( \
                INSERT INTO events (task_id, seq, kind, data, created_at) \
                SELECT id, last_seq, $4, \
                    json_build_object('worker_id', claimed_by, 'fence', fence, \
                        'attempt', attempts, 'lease_expires_at', lease_expires_at)::text, $2 \
                FROM claimed \
             ) \
             SELECT ",
            task_columns!(),
            ", state, fence FROM claimed"
        )
    };
}

/// Without a cap: the oldest queued task that may run now (`not_before`), of a tenant not
/// passed over (`$5`: the tenants at their spend cap), in one statement.
const CLAIM_OLDEST: &str = concat!(
    "WITH picked AS ( \
        SELECT id FROM tasks WHERE status = 'queued' \
            AND (not_before IS NULL OR not_before <= $2) AND tenant_id <> ALL($5::text[]) \
            AND tenant_id NOT IN (SELECT tenant_id FROM tasks \
                WHERE status = 'queued' AND not_before > $2) \
        ORDER BY id LIMIT 1 \
        FOR UPDATE SKIP LOCKED \
     ), ",
    claim_picked!("")
);

/// With a cap, step 1: the tenant of the oldest queued task that may run now (`$3`,
/// `not_before`), of a tenant that, as far as this statement's snapshot shows, is under the cap
/// (`$1`) and was not found full since nor passed over at its spend cap (`$2`). It locks no row:
/// the row is chosen in step 3, under the tenant's lock.
/// The running set is small (bounded by the workers), so the full tenants are computed once.
const PICK_UNDER_CAP: &str = "\
    WITH full_tenants AS ( \
        SELECT tenant_id FROM tasks WHERE status = 'running' \
        GROUP BY tenant_id HAVING count(*) >= $1 \
    ) \
    SELECT tenant_id FROM tasks \
    WHERE status = 'queued' AND tenant_id <> ALL($2::text[]) \
        AND (not_before IS NULL OR not_before <= $3) \
        AND tenant_id NOT IN (SELECT tenant_id FROM full_tenants) \
    ORDER BY id LIMIT 1";

/// With a cap, step 3, after the tenant's advisory lock: claim the tenant's (`$5`) oldest queued
/// task that may run now, only if the tenant is still under the cap (`$6`). A statement of its
/// own, so under READ COMMITTED its snapshot includes every capped claim of the tenant committed
/// before the lock was granted. The row is picked under the lock, not before it: two claimers
/// of one tenant that each locked a different queued row could otherwise claim the younger
/// first, and a tenant's tasks under a cap would not start in the order they were submitted.
/// A tenant with a task waiting for its spend period's end is passed over here too, in the
/// statement that claims: the pool's list of such tenants is read before the claim, and a
/// task released for the spend cap in between would otherwise let its sibling start.
const CLAIM_IF_UNDER_CAP: &str = concat!(
    "WITH picked AS ( \
        SELECT id FROM tasks WHERE tenant_id = $5 AND status = 'queued' \
            AND (not_before IS NULL OR not_before <= $2) \
            AND (SELECT count(*) FROM tasks r WHERE r.tenant_id = $5 AND r.status = 'running') < $6 \
            AND NOT EXISTS (SELECT 1 FROM tasks w WHERE w.tenant_id = $5 \
                AND w.status = 'queued' AND w.not_before > $2) \
        ORDER BY id LIMIT 1 \
        FOR UPDATE SKIP LOCKED \
     ), ",
    claim_picked!("AND t.status = 'queued'")
);

/// How many tenants one capped claim finds full (after their lock) before giving up until the
/// next poll or hint; each try is a short transaction of its own.
const CAPPED_TRIES: usize = 8;

pub(super) async fn claim(
    pool: &PgPool,
    hints: &Outbox,
    params: ClaimParams<'_>,
) -> Result<Option<Claimed>, StoreError> {
    let row = match params.max_running_per_tenant {
        None => {
            bind_claim(sqlx::query(CLAIM_OLDEST), &params)
                .bind(params.passed_over)
                .fetch_optional(pool)
                .await?
        }
        Some(cap) => claim_capped(pool, &params, i64::from(cap.get())).await?,
    };
    let Some(row) = row else {
        return Ok(None);
    };
    let task = rows::task(&row)?;
    hints.publish(vec![Wakeup::Events {
        task_id: task.id,
        last_seq: task.last_seq,
    }]);
    Ok(Some(Claimed {
        lease: Lease {
            task_id: task.id,
            worker_id: params.worker_id.to_string(),
            fence: row.try_get("fence")?,
        },
        state: checkpoint(row.try_get("state")?)?,
        task,
    }))
}

/// The checkpoint column holds JSON text (migration 0005).
pub(super) fn checkpoint(text: Option<String>) -> Result<Option<serde_json::Value>, StoreError> {
    text.map(|text| rules::parse_json("state", &text))
        .transpose()
}

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

fn bind_claim<'q>(query: PgQuery<'q>, params: &ClaimParams<'q>) -> PgQuery<'q> {
    query
        .bind(params.worker_id)
        .bind(params.now)
        .bind(params.expires_at())
        .bind(kinds::TASK_CLAIMED)
}

/// The capped claim: pick a tenant under the cap, take its advisory lock (held to the end of the
/// transaction), then claim its oldest queued task only if the recount still leaves room. Claimers
/// of one tenant therefore count and claim one at a time, on every replica; claimers of other
/// tenants do not wait. A tenant found full is skipped in the next try.
async fn claim_capped(
    pool: &PgPool,
    params: &ClaimParams<'_>,
    cap: i64,
) -> Result<Option<PgRow>, StoreError> {
    let mut full: Vec<String> = params.passed_over.to_vec();
    for _ in 0..CAPPED_TRIES {
        let mut tx = pool.begin().await?;
        let picked = sqlx::query(PICK_UNDER_CAP)
            .bind(cap)
            .bind(&full)
            .bind(params.now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(picked) = picked else {
            tx.rollback().await?;
            return Ok(None);
        };
        let tenant: String = picked.try_get("tenant_id")?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(TENANT_LOCK_SPACE)
            .bind(tenant_key(&tenant))
            .execute(&mut *tx)
            .await?;
        let claimed = bind_claim(sqlx::query(CLAIM_IF_UNDER_CAP), params)
            .bind(&tenant)
            .bind(cap)
            .fetch_optional(&mut *tx)
            .await?;
        match claimed {
            Some(row) => {
                tx.commit().await?;
                return Ok(Some(row));
            }
            None => {
                tx.rollback().await?;
                full.push(tenant);
            }
        }
    }
    Ok(None)
}

pub(super) async fn heartbeat(
    pool: &PgPool,
    lease: &Lease,
    now: DateTime<Utc>,
    lease_ttl: Duration,
) -> Result<LeaseStatus, StoreError> {
    let updated = sqlx::query(
        "UPDATE tasks SET lease_expires_at = $4 \
         WHERE id = $1 AND claimed_by = $2 AND fence = $3 AND status = 'running'",
    )
    .bind(lease.task_id)
    .bind(&lease.worker_id)
    .bind(lease.fence)
    .bind(now + lease_ttl)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(rules::lease_status(updated))
}

/// Requeues every running task whose lease ended before `now`. The fence is left as is: the
/// cleared `claimed_by` already refuses the old worker, and the next claim bumps the fence.
pub(super) async fn reap_expired(
    pool: &PgPool,
    hints: &Outbox,
    now: DateTime<Utc>,
) -> Result<Vec<TaskId>, StoreError> {
    requeue(pool, hints, now, None).await
}

/// Requeues the running tasks a dead process of this node held (`claimed_by` starting with
/// `prefix`), each with a `task.released` event (reason `owner_restarted`).
pub(super) async fn reclaim(
    pool: &PgPool,
    hints: &Outbox,
    prefix: &str,
    now: DateTime<Utc>,
) -> Result<Vec<TaskId>, StoreError> {
    requeue(pool, hints, now, Some(prefix)).await
}

/// Expired leases (`held_by` None, `task.lease_expired`), or every lease held by a worker id
/// starting with `held_by` (`task.released`, reason `owner_restarted`).
async fn requeue(
    pool: &PgPool,
    hints: &Outbox,
    now: DateTime<Utc>,
    held_by: Option<&str>,
) -> Result<Vec<TaskId>, StoreError> {
    let kind = match held_by {
        None => kinds::TASK_LEASE_EXPIRED,
        Some(_) => kinds::TASK_RELEASED,
    };
    let found = sqlx::query(
        "WITH expired AS ( \
            SELECT id, claimed_by, fence, lease_expires_at FROM tasks \
            WHERE status = 'running' AND CASE WHEN $3::text IS NULL THEN lease_expires_at < $1 \
                ELSE starts_with(claimed_by, $3::text) END \
            ORDER BY id FOR UPDATE SKIP LOCKED \
         ), requeued AS ( \
            UPDATE tasks t SET status = 'queued', claimed_by = NULL, lease_expires_at = NULL, \
                last_seq = t.last_seq + 1, updated_at = $1 \
            FROM expired WHERE t.id = expired.id \
            RETURNING t.id, t.last_seq, expired.claimed_by, expired.fence, \
                expired.lease_expires_at \
         ), logged AS ( \
            INSERT INTO events (task_id, seq, kind, data, created_at) \
            SELECT id, last_seq, $2, \
                CASE WHEN $3::text IS NULL THEN \
                    json_build_object('worker_id', claimed_by, 'fence', fence, \
                        'lease_expires_at', lease_expires_at)::text \
                ELSE json_build_object('worker_id', claimed_by, 'fence', fence, \
                        'reason', 'owner_restarted')::text END, $1 \
            FROM requeued \
         ) \
         SELECT id, last_seq FROM requeued ORDER BY id",
    )
    .bind(now)
    .bind(kind)
    .bind(held_by)
    .fetch_all(pool)
    .await?;
    let mut reaped = Vec::with_capacity(found.len());
    let mut wakeups = Vec::with_capacity(found.len() + 1);
    for row in &found {
        let id: TaskId = row.try_get("id")?;
        wakeups.push(Wakeup::Events {
            task_id: id,
            last_seq: row.try_get("last_seq")?,
        });
        reaped.push(id);
    }
    if !reaped.is_empty() {
        wakeups.push(Wakeup::TaskRunnable);
        hints.publish(wakeups);
    }
    Ok(reaped)
}

/// Takes the session-level advisory lock of `node` on a connection of its own, held for as
/// long as the returned connection lives; `None` when another live session holds it.
pub(super) async fn lock_node(
    pool: &PgPool,
    node: &str,
) -> Result<Option<sqlx::PgConnection>, StoreError> {
    let mut conn = pool.acquire().await?.detach();
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(crate::store::node_key(node))
        .fetch_one(&mut conn)
        .await?;
    Ok(locked.then_some(conn))
}
