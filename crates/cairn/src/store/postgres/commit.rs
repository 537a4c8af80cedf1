//! The fenced worker write: a batch of [`Change`]s, one per task, applied by ONE statement.
//!
//! The statement first locks, in task-id order, the rows whose fence still matches
//! (`claimed_by`, `fence`, `status = 'running'`), then updates exactly those rows and bumps each
//! `last_seq` by its member's number of events. Every insert that follows joins on that update,
//! so a member whose fence does not match writes nothing at all and comes back
//! [`Commit::LeaseLost`], while the other members commit. Events are numbered from the bumped
//! `last_seq` while the row lock is held, so seqs stay dense even against a concurrent cancel or
//! reaper. Every column is bound as an array and expanded with `UNNEST`: a batch costs one round
//! trip and one implicit transaction however many members and rows it carries; the hints go out
//! after it. [`super::group`] gathers the batches; a batch of one is the plain commit.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, Row};

use super::group::Batch;
use super::outbox::Outbox;
use crate::domain::task::{Lease, TaskId};
use crate::store::rules::CommitEffect;
use crate::store::{Change, Commit, StateJson, StoreError};

const COMMIT: &str = "\
WITH input AS ( \
    SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], \
        $6::timestamptz[], $7::boolean[], $8::boolean[], $9::jsonb[], $10::text[], \
        $11::integer[], $30::timestamptz[], $31::bigint[], $32::bigint[]) \
        AS i(id, worker, fence, status, count, now, finishes, keeps, result, state, plan_version, \
            not_before, charged, estimated) \
), locked AS ( \
    SELECT i.* FROM input i JOIN tasks t ON t.id = i.id \
    WHERE t.claimed_by = i.worker AND t.fence = i.fence AND t.status = 'running' \
    ORDER BY i.id FOR UPDATE OF t \
), moved AS ( \
    UPDATE tasks t SET status = i.status, last_seq = t.last_seq + i.count, updated_at = i.now, \
        finished_at = CASE WHEN i.finishes THEN i.now ELSE t.finished_at END, \
        claimed_by = CASE WHEN i.keeps THEN t.claimed_by END, \
        lease_expires_at = CASE WHEN i.keeps THEN t.lease_expires_at END, \
        result = COALESCE(i.result, t.result), state = COALESCE(i.state, t.state), \
        plan_version = COALESCE(i.plan_version, t.plan_version), not_before = i.not_before \
    FROM locked i \
    WHERE t.id = i.id AND t.claimed_by = i.worker AND t.fence = i.fence AND t.status = 'running' \
    RETURNING t.id, t.tenant_id, t.last_seq, i.count, i.now, i.charged, i.estimated \
), logged AS ( \
    INSERT INTO events (task_id, seq, kind, data, created_at) \
    SELECT m.id, m.last_seq - m.count + e.pos, e.kind, e.data, m.now \
    FROM moved m JOIN UNNEST($12::uuid[], $13::bigint[], $14::text[], $15::text[]) \
        AS e(id, pos, kind, data) ON e.id = m.id \
), planned AS ( \
    INSERT INTO plan_versions (task_id, version, reason, caused_by_seq, plan, created_at) \
    SELECT m.id, p.version, p.reason, p.caused_by_seq, p.plan, m.now \
    FROM moved m JOIN UNNEST($16::uuid[], $17::integer[], $18::text[], $19::bigint[], \
        $20::jsonb[]) AS p(id, version, reason, caused_by_seq, plan) ON p.id = m.id \
), charged AS ( \
    INSERT INTO ledger_entries (task_id, milestone_id, kind, unit, amount, created_at) \
    SELECT m.id, e.milestone_id, e.kind, e.unit, e.amount, m.now \
    FROM moved m JOIN UNNEST($21::uuid[], $22::text[], $23::text[], $24::text[], \
        $25::bigint[]) WITH ORDINALITY AS e(id, milestone_id, kind, unit, amount, ord) \
        ON e.id = m.id \
    ORDER BY e.ord \
), spent AS ( \
    INSERT INTO tenant_spend (tenant_id, hour, cost, estimated_cost) \
    SELECT tenant_id, date_trunc('hour', now, 'UTC'), sum(charged)::bigint, \
        sum(estimated)::bigint \
    FROM moved WHERE charged > 0 \
    GROUP BY 1, 2 ORDER BY 1, 2 \
    ON CONFLICT (tenant_id, hour) DO UPDATE SET cost = tenant_spend.cost + EXCLUDED.cost, \
        estimated_cost = tenant_spend.estimated_cost + EXCLUDED.estimated_cost \
), kept AS ( \
    INSERT INTO artifacts (task_id, milestone_id, name, value, created_at) \
    SELECT m.id, e.milestone_id, e.name, e.value, m.now \
    FROM moved m JOIN UNNEST($26::uuid[], $27::text[], $28::text[], $29::jsonb[]) \
        WITH ORDINALITY AS e(id, milestone_id, name, value, ord) ON e.id = m.id \
    ORDER BY e.ord \
) \
SELECT id, last_seq FROM moved";

/// One task's change in a batch, under the lease it was made with.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) lease: Lease,
    pub(super) change: Change,
    pub(super) now: DateTime<Utc>,
}

/// The fenced worker writes as a kind of group-committed batch ([`super::group`]).
#[derive(Debug)]
pub(super) struct Commits;

impl Batch for Commits {
    type Member = Member;
    type Outcome = Commit;

    fn key(member: &Member) -> TaskId {
        member.lease.task_id
    }

    async fn apply(
        conn: &mut PgConnection,
        hints: &Outbox,
        members: &[Member],
    ) -> Result<Vec<Commit>, StoreError> {
        apply(conn, hints, members).await
    }
}

/// Applies `members` (distinct tasks) in one statement on `conn`; the outcomes come back in
/// the members' order, and the hints of the applied ones are recorded in `hints`.
async fn apply(
    conn: &mut PgConnection,
    hints: &Outbox,
    members: &[Member],
) -> Result<Vec<Commit>, StoreError> {
    let columns = Columns::from(members)?;
    let rows = sqlx::query(COMMIT)
        .bind(columns.ids)
        .bind(columns.workers)
        .bind(columns.fences)
        .bind(columns.statuses)
        .bind(&columns.counts)
        .bind(columns.nows)
        .bind(columns.finishes)
        .bind(columns.keeps)
        .bind(columns.results)
        .bind(columns.states)
        .bind(columns.plan_versions)
        .bind(columns.events.ids)
        .bind(columns.events.positions)
        .bind(columns.events.kinds)
        .bind(columns.events.data)
        .bind(columns.plans.ids)
        .bind(columns.plans.versions)
        .bind(columns.plans.reasons)
        .bind(columns.plans.causes)
        .bind(columns.plans.bodies)
        .bind(columns.ledger.ids)
        .bind(columns.ledger.milestones)
        .bind(columns.ledger.kinds)
        .bind(columns.ledger.units)
        .bind(columns.ledger.amounts)
        .bind(columns.artifacts.ids)
        .bind(columns.artifacts.milestones)
        .bind(columns.artifacts.names)
        .bind(columns.artifacts.values)
        .bind(columns.not_befores)
        .bind(columns.charged)
        .bind(columns.estimated)
        .fetch_all(conn)
        .await?;
    let mut moved: HashMap<TaskId, i64> = HashMap::with_capacity(rows.len());
    for row in &rows {
        moved.insert(row.try_get("id")?, row.try_get("last_seq")?);
    }
    let outcomes = members
        .iter()
        .zip(&columns.counts)
        .map(|(member, &count)| match moved.get(&member.lease.task_id) {
            None => Commit::LeaseLost,
            Some(&last_seq) => {
                let effect = CommitEffect::of(&member.change);
                hints.publish(effect.wakeups(member.lease.task_id, last_seq, count));
                CommitEffect::applied(last_seq, count)
            }
        })
        .collect();
    Ok(outcomes)
}

/// A batch's rows turned inside out: one array per column, as `UNNEST` wants them. Every row
/// of a child table carries its member's task id, which the statement joins on.
#[derive(Default)]
struct Columns<'a> {
    ids: Vec<TaskId>,
    workers: Vec<&'a str>,
    fences: Vec<i64>,
    statuses: Vec<&'static str>,
    counts: Vec<i64>,
    nows: Vec<DateTime<Utc>>,
    finishes: Vec<bool>,
    keeps: Vec<bool>,
    results: Vec<Option<&'a Value>>,
    /// The checkpoints as JSON text (the column is `text`: migration 0005).
    states: Vec<Option<&'a str>>,
    plan_versions: Vec<Option<i32>>,
    not_befores: Vec<Option<DateTime<Utc>>>,
    /// Money the member's charges book, and the part of it from estimates: its tenant's
    /// spend grows by them (`tenant_spend`).
    charged: Vec<i64>,
    estimated: Vec<i64>,
    events: EventColumns<'a>,
    plans: PlanColumns<'a>,
    ledger: LedgerColumns<'a>,
    artifacts: ArtifactColumns<'a>,
}

#[derive(Default)]
struct EventColumns<'a> {
    ids: Vec<TaskId>,
    positions: Vec<i64>,
    kinds: Vec<&'a str>,
    /// The payloads as JSON text (the column is `text`: migration 0007).
    data: Vec<String>,
}

#[derive(Default)]
struct PlanColumns<'a> {
    ids: Vec<TaskId>,
    versions: Vec<i32>,
    reasons: Vec<&'a str>,
    causes: Vec<Option<i64>>,
    bodies: Vec<&'a Value>,
}

#[derive(Default)]
struct LedgerColumns<'a> {
    ids: Vec<TaskId>,
    milestones: Vec<Option<&'a str>>,
    kinds: Vec<&'a str>,
    units: Vec<&'a str>,
    amounts: Vec<i64>,
}

#[derive(Default)]
struct ArtifactColumns<'a> {
    ids: Vec<TaskId>,
    milestones: Vec<&'a str>,
    names: Vec<&'a str>,
    values: Vec<&'a Value>,
}

impl<'a> Columns<'a> {
    fn from(members: &'a [Member]) -> Result<Self, StoreError> {
        let mut columns = Columns::default();
        for member in members {
            columns.push(member)?;
        }
        Ok(columns)
    }

    fn push(&mut self, member: &'a Member) -> Result<(), StoreError> {
        let Member { lease, change, now } = member;
        let id = lease.task_id;
        let effect = CommitEffect::of(change);
        let count = i64::try_from(change.events.len())
            .map_err(|_| StoreError::Corrupt("too many events in one change".to_string()))?;
        self.ids.push(id);
        self.workers.push(&lease.worker_id);
        self.fences.push(lease.fence);
        self.statuses.push(effect.status.as_str());
        self.counts.push(count);
        self.nows.push(*now);
        self.finishes.push(effect.sets_finished_at());
        self.keeps.push(effect.keeps_lease());
        self.results.push(change.result.as_ref());
        self.states
            .push(change.state.as_ref().map(StateJson::as_str));
        self.plan_versions
            .push(change.plan_version.as_ref().map(|plan| plan.version));
        self.not_befores.push(change.not_before);
        self.charged.push(change.charged_cost());
        self.estimated.push(change.estimated_cost());
        for (position, event) in (1..).zip(&change.events) {
            self.events.ids.push(id);
            self.events.positions.push(position);
            self.events.kinds.push(&event.kind);
            self.events.data.push(event.data.to_string());
        }
        if let Some(plan) = &change.plan_version {
            self.plans.ids.push(id);
            self.plans.versions.push(plan.version);
            self.plans.reasons.push(&plan.reason);
            self.plans.causes.push(plan.caused_by_seq);
            self.plans.bodies.push(&plan.plan);
        }
        for entry in &change.ledger {
            self.ledger.ids.push(id);
            self.ledger.milestones.push(entry.milestone_id.as_deref());
            self.ledger.kinds.push(&entry.kind);
            self.ledger.units.push(&entry.unit);
            self.ledger.amounts.push(entry.amount);
        }
        for artifact in &change.artifacts {
            self.artifacts.ids.push(id);
            self.artifacts.milestones.push(&artifact.milestone_id);
            self.artifacts.names.push(&artifact.name);
            self.artifacts.values.push(&artifact.value);
        }
        Ok(())
    }
}
