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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::suite::{FaultKind, Suite, SuiteTask, TaskStep, fact_refs};
use crate::domain::task::{DEFAULT_TENANT, TaskId};
use crate::engine::v2::ports::{
    FailureKind, ModelCall, ModelPort, ModelReply, PortError, Purpose, ToolCall, ToolPort,
    ToolReply, ToolSpec,
};
use crate::store::Store;

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
    pub model_calls: u32,
    pub tool_calls: u32,
}

#[derive(Debug, Clone)]
struct Binding {
    task: String,
    repeat: u32,
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
        let mut tools: BTreeMap<String, bool> = BTreeMap::new();
        for step in suite.tasks.iter().flat_map(|t| t.steps.iter()) {
            *tools.entry(step.tool.clone()).or_default() |= step.writes;
        }
        tools.insert(LOCATE.into(), false);
        let specs = tools
            .into_iter()
            .map(|(name, side_effects)| ToolSpec {
                description: format!("simulated tool {name}"),
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
                answer.is_some_and(|a| value_text(a).contains(&truth))
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

/// What the model can see, and the deterministic draws it makes.
struct Mind<'a> {
    task: &'a SuiteTask,
    repeat: u32,
    seed: u64,
    guess_success: f64,
    context: String,
    facts: BTreeMap<String, String>,
}

impl Mind<'_> {
    fn sees(&self, token: &str) -> bool {
        self.context.contains(token)
    }

    fn draw(&self, fact: &str, n: usize) -> f64 {
        let mut hash = Sha256::new();
        hash.update(format!(
            "{}|{}|{}|{}|{}",
            self.seed, self.task.id, self.repeat, fact, n
        ));
        let digest = hash.finalize();
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        (u64::from_be_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Rule 1: a fact in context is known; otherwise a seeded guess.
    fn fact(&self, fact: &str) -> String {
        let truth = self.facts.get(fact).cloned().unwrap_or_default();
        if !truth.is_empty() && self.sees(&truth) {
            return truth;
        }
        let marker = format!("guess-{fact}-");
        let n = self.context.matches(&marker).count();
        if self.draw(fact, n) < self.guess_success {
            truth
        } else {
            format!("{marker}{n}")
        }
    }

    fn resolve(&self, template: &str) -> String {
        let mut out = template.to_string();
        for fact in fact_refs(template) {
            out = out.replace(&format!("{{{fact}}}"), &self.fact(&fact));
        }
        out
    }

    fn done(&self, step: &TaskStep) -> bool {
        self.sees(&format!("done:{}", step.id))
    }

    /// Rule 3: the calls that carry out `step`, remedies first when a signal is in context.
    fn calls_for(&self, step: &TaskStep) -> Vec<Value> {
        let mut args: Map<String, Value> = step
            .args
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(self.resolve(v))))
            .collect();
        let mut calls = Vec::new();
        if let Some(fault) = self.task.fault.as_ref().filter(|f| f.step == step.id) {
            let sid = &step.id;
            match fault.kind {
                FaultKind::MissingFile
                    if self.sees(&format!("missing:{sid}"))
                        && !self.sees(&format!("located:{sid}")) =>
                {
                    calls.push(json!({"id": format!("{sid}.locate"), "tool": LOCATE,
                                      "args": {"ref": sid}}));
                }
                FaultKind::UnexpectedResponse if self.sees(&format!("moved:{sid}")) => {
                    args.insert("api".into(), json!("v2"));
                }
                FaultKind::InvalidIntermediate if self.sees(&format!("invalid:{sid}")) => {
                    args.insert("validate".into(), json!("true"));
                }
                FaultKind::IncompleteEvidence if self.sees(&format!("partial:{sid}")) => {
                    args.insert("page".into(), json!("2"));
                }
                FaultKind::ResourceDisappears => {
                    let fact = fault.fact.as_deref().unwrap_or_default();
                    if self.sees(&format!("gone:{sid}"))
                        && !self.sees(&format!("renewed:{fact}"))
                        && let Some(source) = self
                            .task
                            .steps
                            .iter()
                            .find(|s| s.reveals.contains_key(fact))
                    {
                        let mut again = self.call(source, self.plain_args(source));
                        again["id"] = json!(format!("{}.again", source.id));
                        calls.push(again);
                    }
                }
                _ => {}
            }
        }
        calls.push(self.call(step, args));
        calls
    }

    fn plain_args(&self, step: &TaskStep) -> Map<String, Value> {
        step.args
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(self.resolve(v))))
            .collect()
    }

    fn call(&self, step: &TaskStep, args: Map<String, Value>) -> Value {
        json!({"id": step.id, "tool": step.tool, "args": args,
               "expected_output": format!("receipt done:{}", step.id)})
    }

    /// Rule 2: the calls for the first step not yet done, or `None` when all are.
    fn next(&self) -> Option<Vec<Value>> {
        self.task
            .steps
            .iter()
            .find(|s| !self.done(s))
            .map(|s| self.calls_for(s))
    }

    fn answer(&self) -> Value {
        match &self.task.answer {
            Some(template) => json!(self.resolve(template)),
            None => json!("done"),
        }
    }

    fn phases(&self) -> Vec<(String, Vec<&TaskStep>)> {
        let mut phases: Vec<(String, Vec<&TaskStep>)> = Vec::new();
        for step in &self.task.steps {
            match phases.iter_mut().find(|(p, _)| p == step.phase()) {
                Some((_, steps)) => steps.push(step),
                None => phases.push((step.phase().to_string(), vec![step])),
            }
        }
        phases
    }

    /// v2's strategic answer: one milestone per phase, each checked by its last receipt.
    fn plan(&self, tools: &[String]) -> Value {
        let phases = self.phases();
        let provider = |fact: &str| {
            phases
                .iter()
                .find(|(_, steps)| steps.iter().any(|s| s.reveals.contains_key(fact)))
                .map(|(p, _)| p.clone())
        };
        let milestones: Vec<Value> = phases
            .iter()
            .map(|(phase, steps)| {
                let deps: BTreeSet<String> = steps
                    .iter()
                    .flat_map(|s| s.args.values())
                    .flat_map(|v| fact_refs(v))
                    .filter_map(|f| provider(&f))
                    .filter(|p| p != phase)
                    .collect();
                let last = steps.last().map(|s| s.id.clone()).unwrap_or_default();
                json!({"id": phase, "title": format!("carry out {phase}"),
                       "depends_on": deps, "effort": steps.len(), "tools": tools,
                       "outcome": format!("receipt done:{last}"),
                       "accept": {"type": "artifact", "name": last, "non_empty": true}})
            })
            .collect();
        json!({ "milestones": milestones })
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
        let mind = Mind {
            task,
            repeat: binding.repeat,
            seed: suite.world.seed,
            guess_success: suite.world.guess_success,
            context: format!("{}{}", call.prompt, call.input),
            facts,
        };
        let tools: Vec<String> = self.specs.iter().map(|s| s.name.clone()).collect();
        let milestone = call.milestone.as_deref();
        let value = match (call.purpose, milestone) {
            (Purpose::Gate, _) => json!({
                "est_tool_calls": task.steps.len(),
                "touches_writes": task.steps.iter().any(|s| s.writes),
                "targets": task.targets,
                "goal_kind": task.category.as_str(),
            }),
            (Purpose::Tactical, Some("one_shot")) => json!({"answer": mind.answer()}),
            (Purpose::Tactical, Some("reactive")) => match mind.next() {
                Some(calls) => calls.into_iter().next().unwrap_or(Value::Null),
                None => json!({"done": true, "answer": mind.answer()}),
            },
            (Purpose::Tactical, Some("direct")) => match mind.next() {
                Some(calls) => json!({ "steps": calls }),
                None => json!({"done": true, "answer": mind.answer()}),
            },
            (Purpose::Strategic, Some("v1")) => {
                let steps: Vec<Value> = task.steps.iter().flat_map(|s| mind.calls_for(s)).collect();
                if steps.is_empty() {
                    json!({"steps": [], "answer": mind.answer()})
                } else {
                    json!({ "steps": steps })
                }
            }
            (Purpose::Strategic, _) => mind.plan(&tools),
            (Purpose::Tactical, Some(phase)) => {
                let steps: Vec<&TaskStep> =
                    task.steps.iter().filter(|s| s.phase() == phase).collect();
                let pending: Vec<&TaskStep> =
                    steps.iter().copied().filter(|s| !mind.done(s)).collect();
                let chosen = if pending.is_empty() { steps } else { pending };
                let calls: Vec<Value> = chosen.iter().flat_map(|s| mind.calls_for(s)).collect();
                json!({ "steps": calls })
            }
            (Purpose::Tactical, None) => json!({"steps": []}),
            (Purpose::Verifier, _) => {
                let missing: Vec<&str> = task
                    .steps
                    .iter()
                    .filter(|s| !mind.done(s))
                    .map(|s| s.id.as_str())
                    .collect();
                if missing.is_empty() {
                    json!({"verdict": "pass", "reason": "every step's receipt is in the evidence"})
                } else {
                    json!({"verdict": "fail",
                           "reason": format!("no receipt in the evidence for: {}", missing.join(", "))})
                }
            }
        };
        let chars = call.prompt.len() + call.input.to_string().len() + value.to_string().len();
        let per = suite.world.chars_per_token.max(1);
        let tokens = suite.world.tokens_per_call + (chars as u64).div_ceil(per);
        Ok(ModelReply { value, tokens })
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
        self.with_world(call.task_id, task, |world| {
            world.tool_calls += 1;
            perform(task, world, &call.tool, &call.args)
        })
    }
}

fn arg<'a>(args: &'a Value, name: &str) -> &'a str {
    args.get(name).and_then(Value::as_str).unwrap_or_default()
}

fn error(message: String) -> Result<ToolReply, PortError> {
    Ok(ToolReply {
        error: Some(message),
        ..ToolReply::default()
    })
}

fn output(output: Value) -> Result<ToolReply, PortError> {
    Ok(ToolReply {
        output,
        ..ToolReply::default()
    })
}

/// The tools' behaviour: perform a step when the arguments are right, fire the fault.
fn perform(
    task: &SuiteTask,
    world: &mut TaskWorld,
    tool: &str,
    args: &Value,
) -> Result<ToolReply, PortError> {
    if tool == LOCATE {
        let sid = arg(args, "ref");
        let hit = task
            .fault
            .as_ref()
            .is_some_and(|f| f.kind == FaultKind::MissingFile && f.step == sid);
        if hit {
            world.located = true;
            return output(json!({"found": true, "signal": format!("located:{sid}")}));
        }
        return error(format!("locate: nothing to locate for {sid:?}"));
    }
    let candidates: Vec<&TaskStep> = task.steps.iter().filter(|s| s.tool == tool).collect();
    if candidates.is_empty() {
        return error(format!("{tool}: not available in this environment"));
    }
    // The step meant is the first one of this tool whose arguments all match; failing that,
    // the first one not yet performed (its mismatching argument is then reported).
    let matches = |step: &TaskStep| {
        step.args
            .iter()
            .all(|(k, v)| arg(args, k) == resolve_truth(v, &world.facts))
    };
    let step = candidates
        .iter()
        .find(|s| matches(s))
        .or_else(|| {
            candidates
                .iter()
                .find(|s| !world.performed.contains_key(&s.id))
        })
        .or_else(|| candidates.first())
        .copied()
        .ok_or_else(|| PortError::new(FailureKind::Permanent, "no step"))?;
    let sid = step.id.clone();
    if let Some(fault) = task.fault.as_ref().filter(|f| f.step == sid) {
        match fault.kind {
            FaultKind::ToolTimeout if world.fault_hits < fault.times.unwrap_or(1) => {
                world.fault_hits += 1;
                return Err(PortError::new(
                    FailureKind::Transient,
                    format!("{tool}: timed out after 30000 ms (signal timeout:{sid})"),
                ));
            }
            FaultKind::ResourceDisappears if !world.gone => {
                world.gone = true;
                world.fault_hits += 1;
                let fact = fault.fact.clone().unwrap_or_default();
                let old = world.facts.get(&fact).cloned().unwrap_or_default();
                world.facts.insert(fact, format!("{old}-renewed"));
                return error(format!(
                    "{tool}: resource {old} is gone (signal gone:{sid})"
                ));
            }
            _ => {}
        }
    }
    for (name, template) in &step.args {
        let expected = resolve_truth(template, &world.facts);
        let given = arg(args, name);
        if given != expected {
            return error(format!("{tool}: not found: {name}={given:?}"));
        }
    }
    if let Some(fault) = task.fault.as_ref().filter(|f| f.step == sid) {
        match fault.kind {
            FaultKind::MissingFile if !world.located => {
                world.fault_hits += 1;
                let path = step.args.values().next().cloned().unwrap_or_default();
                return error(format!(
                    "{tool}: no such file: {} (signal missing:{sid})",
                    resolve_truth(&path, &world.facts)
                ));
            }
            FaultKind::UnexpectedResponse if arg(args, "api") != "v2" => {
                world.fault_hits += 1;
                return output(
                    json!({"status": "moved", "detail": "this endpoint answers in API v2",
                                     "signal": format!("moved:{sid}")}),
                );
            }
            FaultKind::InvalidIntermediate if arg(args, "validate") != "true" => {
                world.fault_hits += 1;
                return output(json!({"ok": true, "valid": false,
                                     "problems": ["the produced data does not match its schema"],
                                     "signal": format!("invalid:{sid}")}));
            }
            FaultKind::IncompleteEvidence if arg(args, "page") != "2" => {
                world.fault_hits += 1;
                return output(
                    json!({"items": ["first half of the evidence"], "complete": false,
                                     "next_page": "2", "signal": format!("partial:{sid}")}),
                );
            }
            _ => {}
        }
    }
    let count = world.performed.entry(sid.clone()).or_insert(0);
    *count += 1;
    if *count > 1 && step.writes {
        world.repeated_side_effects += 1;
    }
    let mut revealed: Map<String, Value> = step
        .reveals
        .keys()
        .map(|k| {
            (
                k.clone(),
                json!(world.facts.get(k).cloned().unwrap_or_default()),
            )
        })
        .collect();
    revealed.insert("receipt".into(), json!(format!("done:{sid}")));
    if world.gone
        && let Some(fact) = task.fault.as_ref().and_then(|f| f.fact.clone())
        && step.reveals.contains_key(&fact)
    {
        revealed.insert("signal".into(), json!(format!("renewed:{fact}")));
    }
    Ok(ToolReply {
        output: Value::Object(revealed.clone()),
        artifacts: BTreeMap::from([(sid, Value::Object(revealed))]),
        error: None,
    })
}
