//! The model's side of the world: what it sees in its context and the deterministic draws it
//! makes (rules 1 to 3 of the module documentation).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::slips::{Pick, SlipRates};
use super::{LOCATE, Receipts};
use crate::slip_rates::Answer;
use crate::suite::{FaultKind, Suite, SuiteTask, TaskStep, fact_refs};
use cairn::engine::runtime::ports::{ModelCall, Purpose};

/// What the model can see, and the deterministic draws it makes.
pub(super) struct Mind<'a> {
    pub(super) task: &'a SuiteTask,
    pub(super) repeat: u32,
    pub(super) seed: u64,
    pub(super) guess_success: f64,
    pub(super) gate_noise: u32,
    pub(super) slips: SlipRates,
    pub(super) context: String,
    pub(super) facts: BTreeMap<String, String>,
}

impl<'a> Mind<'a> {
    /// The mind answering (or judged on) `call` about `task`.
    pub(super) fn new(
        suite: &Suite,
        task: &'a SuiteTask,
        repeat: u32,
        call: &ModelCall,
        facts: BTreeMap<String, String>,
    ) -> Mind<'a> {
        Mind {
            task,
            repeat,
            seed: suite.world.seed,
            guess_success: suite.world.guess_success,
            gate_noise: suite.world.gate_noise,
            slips: suite.world.slips,
            context: super::context_of(call),
            facts,
        }
    }
}

impl Mind<'_> {
    fn sees(&self, token: &str) -> bool {
        self.context.contains(token)
    }

    pub(super) fn draw(&self, fact: &str, n: usize) -> f64 {
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

    /// Where a call's scope starts in the task: the index of its first pending step, or the
    /// task's length when nothing is pending. Slip draws are keyed by it (with the markers in
    /// context), so the same scope in the same context draws alike, and two scopes (two
    /// milestones of one task, each with one step pending) draw apart.
    pub(super) fn scope_at(&self, pending: &[&TaskStep]) -> usize {
        pending
            .first()
            .and_then(|first| self.task.steps.iter().position(|s| s.id == first.id))
            .unwrap_or(self.task.steps.len())
    }

    /// Rule 2: a step is done when its receipt (with the world's nonce) is in context.
    fn done(&self, step: &TaskStep) -> bool {
        let receipts = Receipts {
            seed: self.seed,
            task: &self.task.id,
            repeat: self.repeat,
        };
        self.sees(&receipts.of(&step.id))
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

    /// The steps not yet done, in order.
    pub(super) fn pending(&self) -> Vec<&TaskStep> {
        self.task.steps.iter().filter(|s| !self.done(s)).collect()
    }

    /// Rule 2 (and the slips of rules 8 and 9): the calls for the first step not yet done, or
    /// `None` when all are, or when the call stops early.
    fn next(&self, tools: &[String]) -> Option<Vec<Value>> {
        let pending = self.pending();
        if let Some(invented) = self.invented(&pending, tools, Answer::Move) {
            return Some(vec![invented]);
        }
        if pending.is_empty() {
            return None;
        }
        match self.pick(&pending) {
            Pick::Stop => None,
            Pick::Step(index) if !Self::offers(tools, pending[index]) => self
                .unoffered(&pending[index..], tools)
                .map(|call| vec![call]),
            Pick::Step(index) => Some(self.calls_for(pending[index])),
        }
    }

    /// A list of the calls for `steps` (all of a scope), cut after the first pending one when
    /// the call stops early (rule 8), or one invented call instead (rule 9), or ended by an
    /// invented call in place of a later pending step (rule 9, `invent_later`).
    fn list(&self, steps: &[&TaskStep], tools: &[String]) -> Vec<Value> {
        let pending: Vec<&TaskStep> = steps.iter().copied().filter(|s| !self.done(s)).collect();
        if let Some(invented) = self.invented(&pending, tools, Answer::List) {
            return vec![invented];
        }
        let cut = match pending.first() {
            Some(first) if self.pick(&pending) == Pick::Stop => {
                steps.iter().position(|s| s.id == first.id).map(|i| i + 1)
            }
            _ => None,
        };
        let kept = &steps[..cut.unwrap_or(steps.len())];
        let mut calls = Vec::new();
        for step in kept {
            if !self.done(step) && !Self::offers(tools, step) {
                let from = pending.iter().position(|s| s.id == step.id).unwrap_or(0);
                calls.extend(self.unoffered(&pending[from..], tools));
                break;
            }
            let later = pending.first().is_some_and(|first| first.id != step.id);
            if later
                && !self.done(step)
                && let Some(invented) = self.invented_later(step, &pending, tools)
            {
                calls.push(invented);
                break;
            }
            calls.extend(self.calls_for(step));
        }
        calls
    }

    fn answer(&self) -> Value {
        match &self.task.answer {
            Some(template) => json!(self.resolve(template)),
            None => json!("done"),
        }
    }

    /// The gate's features as a model reads them off the goal: whether it writes and how
    /// many targets it names are visible in its text; the number of tool calls is an
    /// estimate, off by a seeded draw within `gate_noise`; the kind is what the goal does,
    /// never the suite's category.
    fn gate(&self) -> Value {
        let writes = self.task.steps.iter().any(|s| s.writes);
        let spread = i64::from(self.gate_noise);
        let width = 2 * spread + 1;
        let offset = (self.draw("gate", 0) * width as f64).floor() as i64 - spread;
        let estimate = (self.task.steps.len() as i64 + offset.min(spread)).max(0);
        let kind = match (writes, self.task.steps.is_empty()) {
            (true, _) => "change",
            (false, true) => "knowledge",
            (false, false) => "lookup",
        };
        json!({
            "est_tool_calls": estimate,
            "touches_writes": writes,
            "targets": self.task.targets,
            "goal_kind": kind,
        })
    }

    /// The answer to one model call, by purpose and (for tactical calls) milestone.
    pub(super) fn reply(
        &self,
        purpose: Purpose,
        milestone: Option<&str>,
        tools: &[String],
    ) -> Value {
        match (purpose, milestone) {
            (Purpose::Gate, _) => self.gate(),
            (Purpose::Tactical, Some("one_shot")) => json!({"answer": self.answer()}),
            (Purpose::Tactical, Some("reactive")) => match self.next(tools) {
                Some(calls) => calls.into_iter().next().unwrap_or(Value::Null),
                None => json!({"done": true, "answer": self.answer()}),
            },
            (Purpose::Tactical, Some("direct")) => match self.next(tools) {
                Some(calls) => json!({ "steps": calls }),
                None => json!({"done": true, "answer": self.answer()}),
            },
            (Purpose::Strategic, Some("v1")) => {
                let all: Vec<&TaskStep> = self.task.steps.iter().collect();
                let steps = self.list(&all, tools);
                if steps.is_empty() {
                    json!({"steps": [], "answer": self.answer()})
                } else {
                    json!({ "steps": steps })
                }
            }
            (Purpose::Strategic, _) => self.plan(tools),
            (Purpose::Tactical, Some(phase)) => {
                let steps: Vec<&TaskStep> = self
                    .task
                    .steps
                    .iter()
                    .filter(|s| s.phase() == phase)
                    .collect();
                let pending: Vec<&TaskStep> =
                    steps.iter().copied().filter(|s| !self.done(s)).collect();
                let chosen = if pending.is_empty() { steps } else { pending };
                json!({ "steps": self.list(&chosen, tools) })
            }
            (Purpose::Tactical, None) => json!({"steps": []}),
            (Purpose::Verifier, _) => {
                let missing: Vec<&str> = self
                    .task
                    .steps
                    .iter()
                    .filter(|s| !self.done(s))
                    .map(|s| s.id.as_str())
                    .collect();
                if missing.is_empty() {
                    json!({"verdict": "pass", "reason": "every step's receipt is in the evidence"})
                } else {
                    json!({"verdict": "fail",
                           "reason": format!("no receipt in the evidence for: {}", missing.join(", "))})
                }
            }
        }
    }
}

/// The slips of rule 8 (`super::slips`), drawn for one call.
impl Mind<'_> {
    /// Pending steps of `scope` that the input does not name (as a milestone id or a step id).
    pub(super) fn unwritten(&self, pending: &[&TaskStep]) -> usize {
        let named = |name: &str| self.context.contains(&format!("\"{name}\""));
        pending
            .iter()
            .filter(|s| !named(s.phase()) && !named(&s.id))
            .count()
    }

    /// The slips of one call over `pending` (in order, non-empty): stop, misorder, or the next.
    pub(super) fn pick(&self, pending: &[&TaskStep]) -> Pick {
        let unwritten = self.unwritten(pending);
        let progress = self.scope_at(pending);
        if self.draw("slip-stop", progress) < self.slips.stop(unwritten, self.context.len()) {
            return Pick::Stop;
        }
        let learned = |s: &TaskStep| self.context.contains(&format!("order:{}", s.id));
        if pending.len() >= 2
            && !learned(pending[1])
            && self.draw("slip-misorder", progress) < self.slips.misorder(unwritten)
        {
            return Pick::Step(1);
        }
        Pick::Step(0)
    }
}
