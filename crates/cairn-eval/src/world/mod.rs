//! The simulated world of an evaluation: one model and one set of tools, shared by every
//! strategy, driven by the suite's ground truth (see `docs/evaluation.md`).
//!
//! Why a world model rather than scripted replies per strategy: scripts would decide the
//! results. Here one policy answers every question any strategy asks, and the only thing that
//! differs between strategies is what they put in the model's context and when. The rules,
//! all deterministic given the suite's seed:
//!
//! 1. **Knowledge.** The model writes a fact (a `{fact}` argument) correctly when the fact's
//!    current value appears in its context (the JSON input it was sent). Otherwise it guesses;
//!    a guess is right with probability `guess_success`, drawn from a hash of (seed, task,
//!    repeat, fact, guesses already in context), so it never depends on the strategy.
//! 2. **Progress.** A step whose receipt (`done:STEP`) is in context is not proposed again,
//!    except by v1, which always writes a complete list.
//! 3. **Signals.** An injected fault leaves a signal in what the tool answers (`missing:STEP`,
//!    `moved:STEP`, ...). A model that sees it in context applies the documented remedy
//!    (locate the file, use the new API version, validate, fetch the next page, re-fetch the
//!    vanished resource); a timeout is remedied by calling again.
//! 4. **Cost.** Each model call costs `tokens_per_call` plus one token per `chars_per_token`
//!    characters of prompt, input and answer: long contexts cost more, whoever sends them.
//!
//! The tools keep per-task state and perform a step only with the right arguments; the
//! acceptance check ([`World::accept`]) reads that state, never a strategy's own claim.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::suite::{Suite, SuiteTask, fact_refs};
use cairn::domain::task::{DEFAULT_TENANT, Strategy, TaskId};
use cairn::engine::runtime::ports::{
    FailureKind, ModelCall, ModelPort, ModelReply, PortError, TokenSplit, ToolCall, ToolPort,
    ToolReply, ToolSpec,
};
use cairn::store::Store;

#[cfg(test)]
mod fair_tests;
mod invent;
mod judge;
mod mind;
mod perform;
#[cfg(test)]
mod plan_tests;
mod plans;
#[cfg(test)]
mod scope_tests;
pub mod slips;
mod specs;
#[cfg(test)]
mod stated_tests;
#[cfg(test)]
mod tests;

pub use judge::{Judged, StepJudged, Verdict};
use mind::Mind;
use perform::perform;

/// The remedy tool for `missing_file`.
pub const LOCATE: &str = "locate";

/// Metadata key under which the runner tags a task with its suite task and repeat.
pub const META_KEY: &str = "eval";

/// What the world remembers of one submitted task.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskWorld {
    /// Valid performances per step.
    pub performed: BTreeMap<String, u32>,
    /// Current value of every fact (a vanished resource gets a new one).
    #[serde(skip)]
    pub facts: BTreeMap<String, String>,
    /// Times the injected fault fired.
    pub fault_hits: u32,
    pub located: bool,
    pub gone: bool,
    /// Side-effecting steps performed more than once.
    pub repeated_side_effects: u32,
    /// Calls refused because a prerequisite step had not happened yet.
    pub misordered: u32,
    pub model_calls: u32,
    pub tool_calls: u32,
    /// Whether the task's first tool call was right: a valid performance of a step, or the
    /// call the injected fault answered in its place (the fault is the world's doing, not the
    /// model's); `None` before any call.
    pub first_call_right: Option<bool>,
}

/// The receipts of one task's valid performances: `done:STEP#NONCE`, the nonce drawn from
/// (seed, task, repeat, step), so only a tool's output carries one and no text a planner wrote
/// can pass for it ("receipt done:STEP" in a plan's outcome is not a receipt).
pub(super) struct Receipts<'a> {
    pub(super) seed: u64,
    pub(super) task: &'a str,
    pub(super) repeat: u32,
}

impl Receipts<'_> {
    pub(super) fn of(&self, step: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(format!(
            "receipt|{}|{}|{}|{step}",
            self.seed, self.task, self.repeat
        ));
        let digest = hash.finalize();
        let nonce: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        format!("done:{step}#{nonce}")
    }
}

/// The run a submitted task is: its suite task, repeat and strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub task: String,
    pub repeat: u32,
    /// The stored task's strategy (the matrix's column).
    pub strategy: Strategy,
}

/// The model and tool ports of one evaluation.
pub struct World {
    suite: Arc<Suite>,
    store: Arc<dyn Store>,
    bindings: Mutex<HashMap<TaskId, Binding>>,
    state: Mutex<HashMap<TaskId, TaskWorld>>,
    specs: Vec<ToolSpec>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl World {
    pub fn new(suite: Arc<Suite>, store: Arc<dyn Store>) -> World {
        let specs = specs::all_tools(&suite)
            .into_iter()
            .map(|(name, side_effects)| ToolSpec {
                description: format!("simulated tool {name}"),
                artifacts: specs::declared(&suite, &name),
                name,
                schema: json!({"type": "object"}),
                side_effects,
            })
            .collect();
        World {
            suite,
            store,
            bindings: Mutex::new(HashMap::new()),
            state: Mutex::new(HashMap::new()),
            specs,
        }
    }

    /// The same world with its tools described for a real model (`cairn eval --live`): each
    /// tool's arguments, with descriptions, instead of open objects.
    pub fn with_described_tools(mut self) -> World {
        self.specs = specs::described(&self.suite);
        self
    }

    /// The world state of a task (after it ended: what the acceptance check reads).
    pub fn task_world(&self, id: TaskId) -> TaskWorld {
        lock(&self.state).get(&id).cloned().unwrap_or_default()
    }

    /// The acceptance check: every step performed validly, and the answer (if the task asks
    /// for one) containing the true facts.
    pub fn accept(&self, task: &SuiteTask, id: TaskId, answer: Option<&Value>) -> bool {
        let world = self.task_world(id);
        let steps_done = task
            .steps
            .iter()
            .all(|s| world.performed.get(&s.id).copied().unwrap_or(0) > 0);
        let answered = match &task.answer {
            None => true,
            Some(template) => {
                let truth = resolve_truth(template, &truth_facts(task));
                answer.is_some_and(|a| perform::states(&value_text(a), &truth))
            }
        };
        steps_done && answered
    }

    async fn bind(&self, id: TaskId) -> Result<(Arc<Suite>, Binding), PortError> {
        if let Some(binding) = lock(&self.bindings).get(&id).cloned() {
            return Ok((self.suite.clone(), binding));
        }
        let task = self
            .store
            .get_task(DEFAULT_TENANT, id)
            .await
            .map_err(|e| PortError::new(FailureKind::Transient, e.to_string()))?
            .ok_or_else(|| PortError::new(FailureKind::Permanent, "unknown task"))?;
        let meta = &task.metadata[META_KEY];
        let binding = Binding {
            task: meta["task"].as_str().unwrap_or_default().to_string(),
            repeat: u32::try_from(meta["repeat"].as_u64().unwrap_or(0)).unwrap_or(0),
            strategy: task.strategy,
        };
        if self.suite.task(&binding.task).is_none() {
            return Err(PortError::new(
                FailureKind::Permanent,
                format!("task {id} is not a task of suite {}", self.suite.name),
            ));
        }
        lock(&self.bindings).insert(id, binding.clone());
        Ok((self.suite.clone(), binding))
    }

    fn with_world<R>(
        &self,
        id: TaskId,
        task: &SuiteTask,
        f: impl FnOnce(&mut TaskWorld) -> R,
    ) -> R {
        let mut state = lock(&self.state);
        let world = state.entry(id).or_insert_with(|| TaskWorld {
            facts: truth_facts(task),
            ..TaskWorld::default()
        });
        f(world)
    }
}

/// The facts' original values.
fn truth_facts(task: &SuiteTask) -> BTreeMap<String, String> {
    task.steps
        .iter()
        .flat_map(|s| s.reveals.iter())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn resolve_truth(template: &str, facts: &BTreeMap<String, String>) -> String {
    let mut out = template.to_string();
    for fact in fact_refs(template) {
        if let Some(value) = facts.get(&fact) {
            out = out.replace(&format!("{{{fact}}}"), value);
        }
    }
    out
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The tools a call offers the model (its input's `tools`, by name), as a model answering under
/// the call's schema can only name those; `None` when the input lists none.
fn offered(call: &ModelCall) -> Option<Vec<String>> {
    let listed = call.input.get("tools")?.as_array()?;
    Some(
        listed
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// Everything a call shows the model, as one text: the instruction, the input and every turn
/// of the conversation (what the world's policy reads and what its cost counts).
pub(crate) fn context_of(call: &ModelCall) -> String {
    let mut context = format!("{}{}", call.prompt, call.input);
    for turn in &call.turns {
        context.push_str(&turn.content.to_string());
    }
    context
}

impl World {
    /// Counts a model call answered by something other than the world's policy (a real model
    /// under `cairn eval --live`), so the report's model calls are the calls made.
    pub async fn count_model_call(&self, call: &ModelCall) {
        let Ok((suite, binding)) = self.bind(call.task_id).await else {
            return;
        };
        if let Some(task) = suite.task(&binding.task) {
            self.with_world(call.task_id, task, |w| w.model_calls += 1);
        }
    }

    /// The run the task `id` is (`None` for a task of no suite).
    pub async fn run_of(&self, id: TaskId) -> Option<Binding> {
        self.bind(id).await.ok().map(|(_, binding)| binding)
    }

    /// A real model's answer to `call`, judged against the ground truth as it stands
    /// (`cairn eval --live` traces); `None` for a task of no suite.
    pub async fn judge(&self, call: &ModelCall, value: &Value) -> Option<Judged> {
        let (suite, binding) = self.bind(call.task_id).await.ok()?;
        let task = suite.task(&binding.task)?;
        let facts = self.with_world(call.task_id, task, |w| w.facts.clone());
        let mind = Mind::new(&suite, task, binding.repeat, call, facts);
        let judged = mind.judge(value);
        Some(Judged {
            task: task.id.clone(),
            repeat: binding.repeat,
            purpose: call.purpose.as_str().to_string(),
            milestone: call.milestone.clone(),
            chars: mind.context.len(),
            pending: judged.pending,
            unwritten: judged.unwritten,
            first: judged.first,
            covered: judged.covered,
            steps: judged.steps,
        })
    }
}

#[async_trait]
impl ModelPort for World {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        let (suite, binding) = self.bind(call.task_id).await?;
        let Some(task) = suite.task(&binding.task) else {
            return Err(PortError::new(FailureKind::Permanent, "unbound task"));
        };
        let facts = self.with_world(call.task_id, task, |w| {
            w.model_calls += 1;
            w.facts.clone()
        });
        let mind = Mind::new(&suite, task, binding.repeat, &call, facts);
        let tools =
            offered(&call).unwrap_or_else(|| self.specs.iter().map(|s| s.name.clone()).collect());
        let value = mind.reply(call.purpose, call.milestone.as_deref(), &tools);
        let (read, written) = (context_of(&call).len(), value.to_string().len());
        let per = suite.world.chars_per_token.max(1);
        let tokens = suite.world.tokens_per_call + ((read + written) as u64).div_ceil(per);
        // The total is the calibrated figure; the split only tells it apart.
        let output = (written as u64).div_ceil(per).min(tokens);
        Ok(ModelReply {
            value,
            tokens,
            split: TokenSplit {
                input: tokens - output,
                output,
            },
            model: Some("cairn-eval-world".into()),
            asked_output: 0,
            // The world's figures are its calibration, not a provider's report.
            estimated: false,
        })
    }
}

#[async_trait]
impl ToolPort for World {
    fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        let (suite, binding) = self.bind(call.task_id).await?;
        let Some(task) = suite.task(&binding.task) else {
            return Err(PortError::new(FailureKind::Permanent, "unbound task"));
        };
        let receipts = Receipts {
            seed: suite.world.seed,
            task: &task.id,
            repeat: binding.repeat,
        };
        self.with_world(call.task_id, task, |world| {
            world.tool_calls += 1;
            let declared = !specs::declared(&suite, &call.tool).is_empty();
            let marks = |w: &TaskWorld| (w.performed.values().sum::<u32>(), w.fault_hits);
            let before = marks(world);
            let reply = perform(task, world, &receipts, (&call.tool, &call.args), declared);
            if world.first_call_right.is_none() {
                world.first_call_right = Some(marks(world) != before);
            }
            reply
        })
    }
}
