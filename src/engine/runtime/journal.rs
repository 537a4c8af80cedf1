//! The one door through which a task's checkpoint and transitions are written.
//!
//! Why one door: milestones run in parallel, yet the task has one `state` column and one event
//! sequence. Every transition goes through the journal, which takes the state lock, applies the
//! mutation to a draft, and commits draft + events + ledger entries + artifacts (+ plan
//! version, + terminal status) in ONE fenced transaction. Only when the commit applied does the
//! draft become the in-memory state, so a crash resumes from exactly what the last event
//! describes.
//!
//! Fewer transactions: a transition followed by nothing external may be *staged*
//! ([`Journal::stage`]) instead of committed at once: it is applied to the in-memory state and
//! its rows wait for the next commit, which carries every staged transition in order, in the
//! same catalog of events (same kinds, same order, same seqs). What may come between a staged
//! transition and its commit is only engine work and model calls, which change nothing outside;
//! before every tool call the engine flushes ([`Journal::flush`]), and a terminal status is never
//! staged, so nothing is acknowledged or done to the world on the strength of an uncommitted
//! transition. A crash loses at most staged transitions, which the next attempt makes again from
//! the last commit, exactly as it would after a crash during a model call. A yielding run
//! flushes before it hands the task back.
//!
//! A staged transition's seqs are known before its commit: only the lease holder appends to a
//! task's events (a cancel or a requeue in between makes the commit `LeaseLost`), so they follow
//! the last committed seq.

use std::collections::BTreeMap;

use serde_json::Value;
use tokio::sync::Mutex;

use super::checkpoint::{Record, TaskState};
use crate::domain::event::NewEvent;
use crate::domain::task::TaskStatus;
use crate::engine::{Applied, EngineError, Halt, RunContext};
use crate::store::{Change, NewArtifact, NewLedgerEntry, NewPlanVersion, StateJson};

/// Whether a transition is committed now or with the next commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Now,
    Staged,
}

/// The rows of transitions applied to the state and not yet committed.
#[derive(Debug, Default, Clone)]
struct Rows {
    events: Vec<NewEvent>,
    ledger: Vec<NewLedgerEntry>,
    artifacts: Vec<NewArtifact>,
    plan_version: Option<NewPlanVersion>,
}

impl Rows {
    fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.ledger.is_empty()
            && self.artifacts.is_empty()
            && self.plan_version.is_none()
    }

    fn absorb(&mut self, other: Rows) {
        self.events.extend(other.events);
        self.ledger.extend(other.ledger);
        self.artifacts.extend(other.artifacts);
        if other.plan_version.is_some() {
            self.plan_version = other.plan_version;
        }
    }
}

struct Inner {
    state: TaskState,
    staged: Rows,
    /// The seq of the task's last committed event.
    last_seq: i64,
}

/// The serialized writer of a task's state (see the module docs).
pub struct Journal {
    ctx: RunContext,
    inner: Mutex<Inner>,
}

impl Journal {
    pub fn new(ctx: RunContext, state: TaskState) -> Self {
        let last_seq = ctx.task.last_seq;
        Self {
            ctx,
            inner: Mutex::new(Inner {
                state,
                staged: Rows::default(),
                last_seq,
            }),
        }
    }

    pub fn ctx(&self) -> &RunContext {
        &self.ctx
    }

    /// A copy of the current state (for decisions made outside the lock).
    pub async fn snapshot(&self) -> TaskState {
        self.inner.lock().await.state.clone()
    }

    pub async fn read<R>(&self, f: impl FnOnce(&TaskState) -> R) -> R {
        f(&self.inner.lock().await.state)
    }

    /// [`Journal::record`] for the transition of one model call: every event it writes is
    /// marked with the call's prompt version ([`Record::prompted`]).
    pub async fn record_prompted<R>(
        &self,
        prompt: &str,
        mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
    ) -> Result<(Applied, R), Halt> {
        self.transition(When::Now, prompted(prompt, mutate)).await
    }

    /// [`Journal::stage`] for the transition of one model call.
    pub async fn stage_prompted<R>(
        &self,
        prompt: &str,
        mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
    ) -> Result<(Applied, R), Halt> {
        self.transition(When::Staged, prompted(prompt, mutate))
            .await
    }

    /// Applies `mutate` to a draft and commits it with the [`Record`] it returns (and every
    /// staged transition before it), atomically.
    pub async fn record<R>(
        &self,
        mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
    ) -> Result<(Applied, R), Halt> {
        self.transition(When::Now, mutate).await
    }

    /// Applies `mutate` to the state and keeps its rows for the next commit (see the module
    /// docs: only for a transition nothing external follows before the next commit or flush).
    /// A record with a terminal status is committed at once.
    pub async fn stage<R>(
        &self,
        mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
    ) -> Result<(Applied, R), Halt> {
        self.transition(When::Staged, mutate).await
    }

    /// Commits the staged transitions, if any: before a tool call, and before yielding.
    pub async fn flush(&self) -> Result<(), Halt> {
        let mut inner = self.inner.lock().await;
        if inner.staged.is_empty() {
            return Ok(());
        }
        self.commit(&mut inner, None, Rows::default(), None)
            .await
            .map(|_| ())
    }

    async fn transition<R>(
        &self,
        when: When,
        mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
    ) -> Result<(Applied, R), Halt> {
        let mut inner = self.inner.lock().await;
        let mut draft = inner.state.clone();
        let (record, out) = mutate(&mut draft)?;
        let plan_version = next_plan_version(&mut draft, record.plan_version);
        if plan_version.is_some() && inner.staged.plan_version.is_some() {
            // One plan version per commit: the staged one goes first.
            self.commit(&mut inner, None, Rows::default(), None).await?;
        }
        let count = i64::try_from(record.events.len()).unwrap_or(i64::MAX);
        let rows = Rows {
            events: record.events,
            ledger: record.ledger,
            artifacts: record.artifacts,
            plan_version,
        };
        if when == When::Staged && record.status.is_none() {
            let staged = i64::try_from(inner.staged.events.len()).unwrap_or(i64::MAX);
            let first_seq = inner.last_seq + staged + 1;
            inner.staged.absorb(rows);
            inner.state = draft;
            let applied = Applied {
                first_seq,
                last_seq: first_seq + count - 1,
            };
            return Ok((applied, out));
        }
        let ending = record.status.map(|status| (status, record.result));
        let last_seq = self.commit(&mut inner, Some(draft), rows, ending).await?;
        let applied = Applied {
            first_seq: last_seq - count + 1,
            last_seq,
        };
        Ok((applied, out))
    }

    /// Commits the staged rows, then `rows`, with `state` (`None`: the in-memory state as it
    /// is, without a copy) and the terminal status and result of `ending`. On success `state`
    /// becomes the in-memory state; on failure nothing changes. Returns the last seq.
    async fn commit(
        &self,
        inner: &mut Inner,
        state: Option<TaskState>,
        rows: Rows,
        ending: Option<(TaskStatus, Option<Value>)>,
    ) -> Result<i64, Halt> {
        let mut all = inner.staged.clone();
        all.absorb(rows);
        let expected = inner.last_seq + i64::try_from(all.events.len()).unwrap_or(i64::MAX);
        let (status, result) = match ending {
            Some((status, result)) => (Some(status), result),
            None => (None, None),
        };
        let value = StateJson::of(state.as_ref().unwrap_or(&inner.state))
            .map_err(|error| EngineError::Checkpoint(error.to_string()))?;
        let applied = self
            .ctx
            .commit(Change {
                status,
                result,
                state: Some(value),
                plan_version: all.plan_version,
                events: all.events,
                ledger: all.ledger,
                artifacts: all.artifacts,
                release: false,
            })
            .await?;
        if applied.last_seq != expected {
            // Someone else appended to this task's events under our lease: the seqs handed out
            // for staged transitions (links such as a plan version's cause) may be off.
            tracing::warn!(
                task_id = %self.ctx.task.id,
                expected,
                got = applied.last_seq,
                "event seqs moved under the lease"
            );
        }
        inner.last_seq = applied.last_seq;
        inner.staged = Rows::default();
        if let Some(state) = state {
            inner.state = state;
        }
        Ok(applied.last_seq)
    }
}

/// Marks every event of the transition with the prompt version of its model call.
fn prompted<R>(
    prompt: &str,
    mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
) -> impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt> {
    move |state| {
        let (mut record, out) = mutate(state)?;
        record.prompted(prompt);
        Ok((record, out))
    }
}

/// The plan version a record asks for, numbered on the draft.
fn next_plan_version(
    draft: &mut TaskState,
    asked: Option<(String, Option<i64>)>,
) -> Option<NewPlanVersion> {
    let (reason, caused_by_seq) = asked?;
    draft.plan_version += 1;
    if draft.plan_version > 1 {
        draft.metrics.replans += 1;
    }
    Some(NewPlanVersion {
        version: draft.plan_version,
        reason,
        caused_by_seq,
        plan: plan_snapshot(draft),
    })
}

/// A plan version's body: the plan (milestone statuses and steps), plus the ledger state and
/// the names of the artifacts each milestone holds, so a version is readable on its own.
fn plan_snapshot(state: &TaskState) -> Value {
    let mut value = serde_json::to_value(&state.plan).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        if let Some(ledger) = &state.ledger {
            map.insert(
                "ledger".into(),
                serde_json::to_value(ledger).unwrap_or(Value::Null),
            );
        }
        let refs: BTreeMap<&String, Vec<&String>> = state
            .artifacts
            .iter()
            .map(|(milestone, named)| (milestone, named.keys().collect()))
            .collect();
        map.insert(
            "artifacts".into(),
            serde_json::to_value(refs).unwrap_or(Value::Null),
        );
    }
    value
}
