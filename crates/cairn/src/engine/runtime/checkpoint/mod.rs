//! The engine's checkpoint: the task's resumable state and the [`Record`] of one transition.
//! The one door through which both are written is [`super::journal::Journal`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::event::NewEvent;
use crate::domain::gate::GateRecord;
use crate::domain::ledger::{Ledger, LedgerMovement, Unit};
use crate::domain::plan::Plan;
use crate::domain::repair::{RepairHistory, RepairLevel, ReplanReason};
pub use crate::domain::report::{Metrics, Phase, Spend};
use crate::domain::task::TaskStatus;
use crate::engine::EngineError;
use crate::store::{NewArtifact, NewLedgerEntry};

/// The repairs of one milestone as the report shows them (the ladder's own bookkeeping is
/// [`TaskState::ladder`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RepairLog {
    /// Rungs in the order they were taken (`retry_step`, `replan_milestone`, ..., `give_up`
    /// for `None`).
    #[serde(with = "rungs")]
    pub levels: Vec<Option<RepairLevel>>,
}

/// Serde for a list of rungs as their names ([`crate::domain::repair::rung_name`]), so giving
/// up is `"give_up"` rather than `null`.
mod rungs {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::domain::repair::{RepairLevel, parse_rung, rung_name};

    pub fn serialize<S: Serializer>(
        levels: &[Option<RepairLevel>],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(levels.iter().map(|level| rung_name(*level)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Option<RepairLevel>>, D::Error> {
        Vec::<String>::deserialize(deserializer)?
            .iter()
            .map(|name| {
                parse_rung(name).ok_or_else(|| D::Error::custom(format!("unknown rung {name:?}")))
            })
            .collect()
    }
}

/// How a milestone ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MilestoneOutcome {
    /// Its acceptance check passed.
    Passed,
    /// The repair ladder was spent.
    Failed,
    /// The ledger could not cover a charge, reserve included.
    OverBudget,
}

/// Why the current step list of a milestone is being (re)made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Why (`check_failed`, `budget_pressure`, `tool_unavailable`, ...).
    pub reason: ReplanReason,
    pub detail: String,
    /// The step that failed, if a step did.
    pub step: Option<String>,
    /// Whether the failure is the executor's (tool error, drift) or the plan's.
    pub executor: bool,
    /// The event that recorded the failure (a plan version's `caused_by_seq`).
    pub seq: Option<i64>,
}

impl Failure {
    /// A failure of the plan (a check, the budget, the verifier), not tied to a step.
    pub fn of_plan(reason: ReplanReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
            step: None,
            executor: false,
            seq: None,
        }
    }

    /// A failure of the executor while it ran `step` (a tool error, a refused call).
    pub fn of_step(reason: ReplanReason, step: &str, detail: impl Into<String>) -> Self {
        Self {
            step: Some(step.to_string()),
            executor: true,
            ..Self::of_plan(reason, detail)
        }
    }

    /// The same failure, recorded by the event at `seq`.
    pub fn at(self, seq: i64) -> Self {
        Self {
            seq: Some(seq),
            ..self
        }
    }
}

/// A milestone's execution record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MilestoneRun {
    /// Tactical model calls so far (the `X-Cairn-Attempt` of the next one is this + 1).
    pub tactical_calls: u32,
    /// Generation of the current step list (reported in `step.finished`; idempotency keys
    /// come from a call's content, not from its step list, see `crate::tools::key`).
    pub generation: u32,
    /// Index of the next step to execute in the current list.
    pub next_step: usize,
    /// True when the current step list is to be replaced before executing further (from
    /// `next_step` on, when no repair is pending: the list is continued).
    pub needs_steps: bool,
    /// Indices of steps whose arguments name a value the planner that wrote them was not shown
    /// ([`crate::domain::grounding`]): after an earlier step succeeds, the rest of the list is
    /// asked for again with its output in view before such a step runs.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub guessed: BTreeSet<usize>,
    /// The repair level asked for the next tactical call, if any.
    pub pending_repair: Option<RepairLevel>,
    pub failure: Option<Failure>,
    /// Short record of what was tried and observed, fed back to the tactical planner.
    pub observations: Vec<Value>,
    pub repairs: RepairLog,
    pub spend: Spend,
    /// Checks evaluated so far (part of each check call's idempotency key).
    pub check_runs: u32,
    /// Set once an L1/L2 repair (or any repair under budget pressure) was started: repaired step
    /// lists then run to their end instead of being cut short by the pressure rule.
    #[serde(default)]
    pub pressured: bool,
    /// Set when a repair found nothing missing on steps that all succeeded: the milestone is
    /// judged by the engine's own check (`steps_succeeded`) instead of the planner's, once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub engine_check: bool,
    /// Tools that failed here and were followed up once after a list that left them out
    /// (`crate::engine::planner::follow_up`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub followed_up: BTreeSet<String>,
    /// How the milestone ended (`passed`, `failed`, `over_budget`).
    pub outcome: Option<MilestoneOutcome>,
}

/// Which engine wrote a checkpoint: the typed tag a resumed task is dispatched by, so it
/// finds its engine again whatever the rollout says now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    #[default]
    V2,
    OneShot,
    Reactive,
    V1,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::V2 => "v2",
            EngineKind::OneShot => "one_shot",
            EngineKind::Reactive => "reactive",
            EngineKind::V1 => "v1",
        }
    }

    /// The tag of a stored checkpoint, `None` when it has none this runtime knows (a fresh
    /// task, or another engine's state such as the test-only minimal engine's).
    pub fn of_checkpoint(state: Option<&Value>) -> Option<EngineKind> {
        #[derive(Deserialize)]
        struct Tagged {
            engine: EngineKind,
        }
        serde_json::from_value::<Tagged>(state?.clone())
            .ok()
            .map(|tagged| tagged.engine)
    }
}

/// What the task's providers have reported beyond what its reservations bounded: the answer
/// tokens per token asked, in parts per million (1,000,000: never more), and the most prompt
/// tokens beyond a prompt's bound. A resumed attempt reserves as the last one learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Learned {
    pub answer_ppm: u64,
    pub prompt_excess: u64,
}

/// Everything an engine on this runtime needs to resume a task. Written with every commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TaskState {
    /// Marks the checkpoint as one engine's, so another engine's state is refused loudly.
    pub engine: EngineKind,
    pub phase: Phase,
    /// The gate decision record (features, reasons, route).
    pub gate: Option<GateRecord>,
    pub plan: Option<Plan>,
    pub plan_version: i32,
    pub ledger: Option<Ledger>,
    /// The unit a call was refused on before it was sent, its smallest form not fitting what
    /// the books had left (`super::reserve`): the task stops `budget_exhausted` at its next
    /// durable point, as for spend nothing covers.
    #[serde(default)]
    pub refused: Option<Unit>,
    /// Overhead spent before the plan (and so the books) existed; replayed ahead of the
    /// allocation when the books open.
    #[serde(default)]
    pub pre_plan_overhead: Vec<LedgerMovement>,
    /// Spend not attributable to a milestone: gate, strategic planning, goal verifier, direct.
    pub overhead: Spend,
    /// The part of the spend booked from estimates (`ledger.estimated`).
    #[serde(default)]
    pub estimated: crate::domain::report::Estimated,
    /// What providers reported beyond what reservations bounded (`reserve::Overreport`).
    #[serde(default)]
    pub learned: Learned,
    pub runs: BTreeMap<String, MilestoneRun>,
    /// Artifacts by milestone, then by name.
    pub artifacts: BTreeMap<String, BTreeMap<String, Value>>,
    pub metrics: Metrics,
    /// The repair ladder's attempts and tried fingerprints (the domain's record).
    #[serde(default)]
    pub ladder: RepairHistory,
    pub strategic_calls: u32,
    pub strategy_replans: u32,
    /// The number of the last message a person sent the task that the engine took.
    #[serde(default)]
    pub messages_seen: u32,
    /// The number of the last approval request whose decision the engine acted on (a plan
    /// sent back to revise, a plan rejected): a crash never acts on one twice.
    #[serde(default)]
    pub approvals_taken: u32,
    /// The attempt that wrote this checkpoint stopped to wait for a sign-off: nothing ran
    /// since, so the next attempt resumes its active milestones without re-checking them.
    #[serde(default)]
    pub parked: bool,
    /// This attempt runs its milestones one at a time (`max_parallel` 1): a waiting milestone's
    /// wall time may be lent to the running one (`domain::ledger::Lenders`). The attempt's
    /// setting, not the task's history: set by each attempt, never stored.
    #[serde(skip)]
    pub sequential: bool,
    /// State of the direct act loop, when the gate chose it.
    pub direct: Option<Value>,
}

impl TaskState {
    pub fn fresh(engine: EngineKind) -> Self {
        Self {
            engine,
            ..Self::default()
        }
    }

    /// Reads `engine`'s checkpoint back; `None` starts fresh.
    pub fn resume(state: Option<&Value>, engine: EngineKind) -> Result<Self, EngineError> {
        let Some(value) = state else {
            return Ok(Self::fresh(engine));
        };
        let state: TaskState = serde_json::from_value(value.clone())
            .map_err(|error| EngineError::Checkpoint(error.to_string()))?;
        if state.engine != engine {
            return Err(EngineError::Checkpoint(format!(
                "checkpoint belongs to engine {:?}, not {:?}",
                state.engine.as_str(),
                engine.as_str()
            )));
        }
        Ok(state)
    }

    pub fn run_mut(&mut self, milestone: &str) -> &mut MilestoneRun {
        self.runs.entry(milestone.to_string()).or_default()
    }
}

/// What one transition writes besides the state itself.
#[derive(Debug, Default)]
pub struct Record {
    pub events: Vec<NewEvent>,
    pub ledger: Vec<NewLedgerEntry>,
    pub artifacts: Vec<NewArtifact>,
    /// Write a new plan version from the draft's plan, with this reason and cause.
    pub plan_version: Option<(String, Option<i64>)>,
    pub status: Option<TaskStatus>,
    pub result: Option<Value>,
}

impl Record {
    pub fn event(kind: &str, data: Value) -> Self {
        Self {
            events: vec![NewEvent::new(kind, data)],
            ..Self::default()
        }
    }

    pub fn push(&mut self, kind: &str, data: Value) {
        self.events.push(NewEvent::new(kind, data));
    }

    /// Ends the task with `status` and its `result`, with the terminal event that carries it.
    pub fn finish(&mut self, status: TaskStatus, result: Value) {
        if let Some(kind) = crate::domain::event::kinds::for_terminal_status(status) {
            self.push(kind, serde_json::json!({"result": result}));
        }
        self.status = Some(status);
        self.result = Some(result);
    }

    /// Marks every event of this transition with the version of the prompt whose call it
    /// records (`"prompt": "strategic@1a2b3c4d"`), so evaluations compare like with like.
    pub fn prompted(&mut self, version: &str) {
        for event in &mut self.events {
            if let Value::Object(data) = &mut event.data {
                data.entry("prompt")
                    .or_insert_with(|| Value::String(version.to_string()));
            }
        }
    }

    pub fn merge(&mut self, other: Record) {
        self.events.extend(other.events);
        self.ledger.extend(other.ledger);
        self.artifacts.extend(other.artifacts);
        if other.plan_version.is_some() {
            self.plan_version = other.plan_version;
        }
        if other.status.is_some() {
            self.status = other.status;
            self.result = other.result;
        }
    }
}

#[cfg(test)]
mod tests;
