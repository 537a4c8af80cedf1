//! The one door through which a task's checkpoint and transitions are written.
//!
//! Why one door: milestones run in parallel, yet the task has one `state` column and one event
//! sequence. Every transition goes through the journal, which takes the state lock, applies the
//! mutation to the state, and commits state + events + ledger entries + artifacts (+ plan
//! version, + terminal status) in ONE fenced transaction, so a crash resumes from exactly what
//! the last event describes. The mutation is made in place, without a copy of the state; a
//! transition whose mutation or commit fails closes the journal (every later transition and
//! flush of the attempt is refused the same way), so nothing is ever written from a state the
//! store does not hold.
//!
//! Fewer transactions: a transition followed by nothing external may be *staged*
//! ([`Journal::stage`]) instead of committed at once: it is applied to the in-memory state and
//! its rows wait for the next commit, which carries every staged transition in order, in the
//! same catalog of events (same kinds, same order, same seqs). What may come between a staged
//! transition and its commit is only engine work and model calls, which change nothing outside;
//! every tool call flushes first ([`Journal::flush`], from `Attempt::call_tool`), and a
//! terminal status is never staged, so nothing is acknowledged or done to the world on the
//! strength of an uncommitted transition. A crash loses at most staged transitions, which the
//! next attempt makes again from the last commit, exactly as it would after a crash during a
//! model call. A yielding run flushes before it hands the task back.
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
    /// Set by the first failed transition (see [`Closed`]).
    closed: Option<Closed>,
}

/// Why the journal refuses every transition after a failed one. A transition mutates the
/// state in place (no copy per transition); when its mutation or its commit fails, memory may
/// hold what the store does not, so nothing more is written from it: the attempt ends, and the
/// next one resumes from the last commit. A parallel milestone's later transition gets the
/// same outcome (the lease lost, or an error as transient as the first), never a commit of
/// half a transition.
#[derive(Debug, Clone)]
enum Closed {
    LeaseLost,
    Failed {
        reason: String,
        transient: bool,
    },
    /// Closed on purpose before a call the tenant's spend cap cannot cover ([`Journal::close`]).
    Deferred(chrono::DateTime<chrono::Utc>),
}

impl Closed {
    fn of(halt: &Halt) -> Self {
        match halt {
            Halt::LeaseLost => Closed::LeaseLost,
            // A park is no failed transition; were it ever one, nothing more is written.
            Halt::Parked => Closed::LeaseLost,
            Halt::Deferred(until) => Closed::Deferred(*until),
            Halt::Error(error) => Closed::Failed {
                reason: error.to_string(),
                transient: error.is_transient(),
            },
        }
    }

    fn halt(&self) -> Halt {
        match self {
            Closed::LeaseLost => Halt::LeaseLost,
            Closed::Deferred(until) => Halt::Deferred(*until),
            Closed::Failed { reason, transient } => Halt::Error(EngineError::Closed {
                reason: reason.clone(),
                transient: *transient,
            }),
        }
    }
}

impl Inner {
    /// `Err` once a transition failed.
    fn open(&self) -> Result<(), Halt> {
        match &self.closed {
            None => Ok(()),
            Some(closed) => Err(closed.halt()),
        }
    }

    /// Passes `result` through, closing the journal when it is a failure.
    fn closing<T>(&mut self, result: Result<T, Halt>) -> Result<T, Halt> {
        if let Err(halt) = &result
            && self.closed.is_none()
        {
            self.closed = Some(Closed::of(halt));
        }
        result
    }
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
                closed: None,
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

    /// Applies `mutate` to the state and commits it with the [`Record`] it returns (and every
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
        inner.open()?;
        if inner.staged.is_empty() {
            return Ok(());
        }
        let committed = self.commit(&mut inner, None, Rows::default(), None).await;
        inner.closing(committed).map(|_| ())
    }

    /// Ends the attempt here, for a stop met outside a transition (a call the tenant's spend
    /// cap cannot cover): what is staged is committed, every later transition refused.
    pub async fn close(&self, halt: &Halt) {
        let mut inner = self.inner.lock().await;
        if inner.closed.is_none() && !inner.staged.is_empty() {
            let committed = self.commit(&mut inner, None, Rows::default(), None).await;
            let _ = inner.closing(committed);
        }
        inner.closed.get_or_insert_with(|| Closed::of(halt));
    }

    async fn transition<R>(
        &self,
        when: When,
        mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
    ) -> Result<(Applied, R), Halt> {
        let mut inner = self.inner.lock().await;
        inner.open()?;
        // One plan version per commit: a staged one is committed first, with the state it
        // describes, so that state is kept (the only copy a transition makes).
        let before = inner
            .staged
            .plan_version
            .is_some()
            .then(|| inner.state.clone());
        let result = self.apply(&mut inner, when, before, mutate).await;
        inner.closing(result)
    }

    /// [`Journal::transition`] on the open journal: `mutate` in place, then the commit (or
    /// the staging) of what it recorded.
    async fn apply<R>(
        &self,
        inner: &mut Inner,
        when: When,
        before: Option<TaskState>,
        mutate: impl FnOnce(&mut TaskState) -> Result<(Record, R), Halt>,
    ) -> Result<(Applied, R), Halt> {
        let (record, out) = mutate(&mut inner.state)?;
        let plan_version = next_plan_version(&mut inner.state, record.plan_version);
        if plan_version.is_some()
            && let Some(before) = &before
        {
            self.commit(inner, Some(before), Rows::default(), None)
                .await?;
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
            let applied = Applied {
                first_seq,
                last_seq: first_seq + count - 1,
            };
            return Ok((applied, out));
        }
        let ending = record.status.map(|status| (status, record.result));
        let last_seq = self.commit(inner, None, rows, ending).await?;
        let applied = Applied {
            first_seq: last_seq - count + 1,
            last_seq,
        };
        Ok((applied, out))
    }

    /// Commits the staged rows, then `rows`, with the checkpoint `state` (`None`: the
    /// in-memory state) and the terminal status and result of `ending`. Returns the last seq.
    /// On failure the caller closes the journal ([`Closed`]).
    async fn commit(
        &self,
        inner: &mut Inner,
        state: Option<&TaskState>,
        rows: Rows,
        ending: Option<(TaskStatus, Option<Value>)>,
    ) -> Result<i64, Halt> {
        let mut all = std::mem::take(&mut inner.staged);
        all.absorb(rows);
        let expected = inner.last_seq + i64::try_from(all.events.len()).unwrap_or(i64::MAX);
        let (status, result) = match ending {
            Some((status, result)) => (Some(status), result),
            None => (None, None),
        };
        let value = StateJson::of(state.unwrap_or(&inner.state))
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
                not_before: None,
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

/// The plan version a record asks for, numbered on the state.
fn next_plan_version(
    draft: &mut TaskState,
    asked: Option<(String, Option<i64>)>,
) -> Option<NewPlanVersion> {
    let (reason, caused_by_seq) = asked?;
    draft.plan_version += 1;
    crate::traces::plan_versioned(i64::from(draft.plan_version));
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
                serde_json::to_value(ledger.summary()).unwrap_or(Value::Null),
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
