//! The minimal engine: a stand-in for the planning engine that exercises the same durable path.
//!
//! It drives a task through `steps` steps. Each step is one fenced commit carrying an
//! `engine.step` event and a checkpoint (`state`), exactly the kind of write the planning engine
//! makes per transition, so leases, fences, crash resume and shutdown are tested on the real
//! path rather than on a shortcut. After the last step it commits `succeeded` with a result and
//! the `task.succeeded` event in one transaction.
//!
//! A resumed attempt continues after the last committed step; a step that was in flight when a
//! process died is redone, never duplicated, because its event only exists if its commit did.
//!
//! Tuning, per task, through `metadata` (values outside the bounds are clamped):
//! - `engine_steps`: number of steps, `1..=1000` (default [`MinimalConfig::steps`]);
//! - `engine_step_ms`: simulated work per step in milliseconds, `0..=600000`
//!   (default [`MinimalConfig::step_ms`]). Tests use it to make a task slow enough to crash.
//!
//! The task's `budget.wall_ms` is honoured: measured from the first claim (`started_at`), so time
//! lost to a crash counts. When it runs out the task ends `budget_exhausted` with a report of
//! how far it got.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Engine, EngineError, Halt, RunContext, RunOutcome, StopSignal};
use crate::domain::event::{NewEvent, kinds};
use crate::domain::task::{Task, TaskStatus};
use crate::store::{Change, StateJson};

/// Metadata key overriding the step count.
pub const META_STEPS: &str = "engine_steps";
/// Metadata key overriding the per-step delay.
pub const META_STEP_MS: &str = "engine_step_ms";
pub const MAX_STEPS: u32 = 1000;
pub const MAX_STEP_MS: u64 = 600_000;

/// Defaults for tasks that do not tune the engine through metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinimalConfig {
    pub steps: u32,
    pub step_ms: u64,
}

impl Default for MinimalConfig {
    fn default() -> Self {
        Self {
            steps: 3,
            step_ms: 100,
        }
    }
}

/// The checkpoint written with every step. The step count and delay are fixed at the first
/// attempt so a resumed task keeps the shape it started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Checkpoint {
    engine: Tag,
    steps: u32,
    step_ms: u64,
    done: u32,
}

/// Marks a checkpoint as the minimal engine's, so another engine's state is refused loudly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Tag {
    Minimal,
}

#[derive(Debug, Clone, Default)]
pub struct MinimalEngine {
    config: MinimalConfig,
}

impl MinimalEngine {
    pub fn new(config: MinimalConfig) -> Self {
        Self { config }
    }

    /// The shape of a fresh run: defaults overridden by bounded metadata.
    fn fresh(&self, task: &Task) -> Checkpoint {
        let meta_u64 = |key: &str| task.metadata.get(key).and_then(Value::as_u64);
        let steps = meta_u64(META_STEPS)
            .map(|n| n.clamp(1, u64::from(MAX_STEPS)) as u32)
            .unwrap_or(self.config.steps)
            .max(1);
        let step_ms = meta_u64(META_STEP_MS)
            .map(|ms| ms.min(MAX_STEP_MS))
            .unwrap_or(self.config.step_ms);
        Checkpoint {
            engine: Tag::Minimal,
            steps,
            step_ms,
            done: 0,
        }
    }

    fn resume(&self, ctx: &RunContext) -> Result<Checkpoint, EngineError> {
        match &ctx.state {
            None => Ok(self.fresh(&ctx.task)),
            Some(state) => {
                let checkpoint: Checkpoint = serde_json::from_value(state.clone())
                    .map_err(|error| EngineError::Checkpoint(error.to_string()))?;
                if checkpoint.done > checkpoint.steps {
                    return Err(EngineError::Checkpoint(format!(
                        "{} steps done of {}",
                        checkpoint.done, checkpoint.steps
                    )));
                }
                Ok(checkpoint)
            }
        }
    }

    async fn drive(&self, ctx: &RunContext) -> Result<RunOutcome, Halt> {
        let mut checkpoint = self.resume(ctx)?;
        let started = ctx.task.started_at.unwrap_or_else(|| ctx.clock.now());
        while checkpoint.done < checkpoint.steps {
            if let Some(signal) = ctx.stop_requested() {
                return Ok(stopped(signal));
            }
            // The step's "work". Abandoning it on a stop is safe: nothing of it is durable yet.
            tokio::select! {
                signal = ctx.stopped() => return Ok(stopped(signal)),
                () = tokio::time::sleep(std::time::Duration::from_millis(checkpoint.step_ms)) => {}
            }
            if let Some(spent) = over_wall_budget(&ctx.task, started, ctx.clock.now()) {
                return budget_exhausted(ctx, &checkpoint, spent).await;
            }
            checkpoint.done += 1;
            let step = json!({
                "index": checkpoint.done,
                "of": checkpoint.steps,
                "attempt": ctx.task.attempts,
                "worker_id": ctx.lease.worker_id,
                "fence": ctx.lease.fence,
            });
            ctx.commit(Change {
                state: Some(to_state(&checkpoint)?),
                events: vec![NewEvent::new(kinds::ENGINE_STEP, step)],
                ..Change::default()
            })
            .await?;
        }
        let result = json!({
            "engine": "minimal",
            "steps": checkpoint.steps,
            "summary": format!("completed {} of {} steps", checkpoint.done, checkpoint.steps),
        });
        ctx.commit(Change {
            status: Some(TaskStatus::Succeeded),
            result: Some(result.clone()),
            state: Some(to_state(&checkpoint)?),
            events: vec![NewEvent::new(
                kinds::TASK_SUCCEEDED,
                json!({ "result": result }),
            )],
            ..Change::default()
        })
        .await?;
        Ok(RunOutcome::Finished(TaskStatus::Succeeded))
    }
}

#[async_trait]
impl Engine for MinimalEngine {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        Halt::settle(self.drive(&ctx).await)
    }
}

fn stopped(signal: StopSignal) -> RunOutcome {
    match signal {
        StopSignal::LeaseLost => RunOutcome::LeaseLost,
        StopSignal::Shutdown | StopSignal::Run => RunOutcome::Yielded,
    }
}

/// Milliseconds spent since the first claim, if that exceeds the task's wall budget.
fn over_wall_budget(task: &Task, started: DateTime<Utc>, now: DateTime<Utc>) -> Option<u64> {
    let spent = u64::try_from((now - started).num_milliseconds()).unwrap_or(0);
    (spent > task.budget.wall_ms).then_some(spent)
}

async fn budget_exhausted(
    ctx: &RunContext,
    checkpoint: &Checkpoint,
    spent_ms: u64,
) -> Result<RunOutcome, Halt> {
    let report = json!({
        "engine": "minimal",
        "reason": "wall_ms budget exceeded",
        "unit": "wall_ms",
        "budget": ctx.task.budget.wall_ms,
        "spent": spent_ms,
        "steps_done": checkpoint.done,
        "steps": checkpoint.steps,
    });
    ctx.commit(Change {
        status: Some(TaskStatus::BudgetExhausted),
        result: Some(report.clone()),
        events: vec![NewEvent::new(
            kinds::TASK_BUDGET_EXHAUSTED,
            json!({ "report": report }),
        )],
        ..Change::default()
    })
    .await?;
    Ok(RunOutcome::Finished(TaskStatus::BudgetExhausted))
}

fn to_state(checkpoint: &Checkpoint) -> Result<StateJson, EngineError> {
    StateJson::of(checkpoint).map_err(|error| EngineError::Checkpoint(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::task::{Budget, Strategy};

    fn task(metadata: Value) -> Task {
        let now = crate::clock::Clock::now(&crate::clock::SystemClock);
        Task {
            tools: None,
            approval: Default::default(),
            progress: None,
            id: uuid::Uuid::now_v7(),
            tenant_id: "default".into(),
            goal: "g".into(),
            strategy: Strategy::Auto,
            budget: Budget {
                tokens: 1,
                tool_calls: 1,
                wall_ms: 1000,
                cost: None,
            },
            metadata,
            status: TaskStatus::Running,
            created_at: now,
            updated_at: now,
            started_at: Some(now),
            finished_at: None,
            plan_version: None,
            result: None,
            attempts: 1,
            last_seq: 2,
        }
    }

    #[test]
    fn metadata_overrides_are_bounded() {
        let engine = MinimalEngine::default();
        let fresh = engine.fresh(&task(json!({})));
        assert_eq!((fresh.steps, fresh.step_ms), (3, 100));
        let fresh = engine.fresh(&task(json!({ META_STEPS: 7, META_STEP_MS: 5 })));
        assert_eq!((fresh.steps, fresh.step_ms), (7, 5));
        let fresh = engine.fresh(&task(json!({ META_STEPS: 0, META_STEP_MS: u64::MAX })));
        assert_eq!((fresh.steps, fresh.step_ms), (1, MAX_STEP_MS));
        let fresh = engine.fresh(&task(json!({ META_STEPS: 1_000_000, META_STEP_MS: "x" })));
        assert_eq!((fresh.steps, fresh.step_ms), (MAX_STEPS, 100));
    }

    #[test]
    fn wall_budget_is_measured_from_first_claim() {
        let task = task(json!({}));
        let started = task
            .started_at
            .unwrap_or_else(|| crate::clock::Clock::now(&crate::clock::SystemClock));
        let within = started + chrono::Duration::milliseconds(1000);
        assert_eq!(over_wall_budget(&task, started, within), None);
        let over = started + chrono::Duration::milliseconds(1001);
        assert_eq!(over_wall_budget(&task, started, over), Some(1001));
    }

    #[test]
    fn checkpoints_round_trip_and_foreign_state_is_refused() {
        let checkpoint = Checkpoint {
            engine: Tag::Minimal,
            steps: 4,
            step_ms: 0,
            done: 2,
        };
        let state = to_state(&checkpoint).expect("serializes");
        let value: Value = serde_json::from_str(state.as_str()).expect("JSON");
        assert_eq!(value["engine"], "minimal");
        let back: Checkpoint = serde_json::from_value(value).expect("parses");
        assert_eq!(back, checkpoint);
        let foreign = serde_json::from_value::<Checkpoint>(json!({"engine": "v2", "done": 1}));
        assert!(foreign.is_err());
    }
}
