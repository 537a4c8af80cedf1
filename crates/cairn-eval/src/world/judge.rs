//! Judging a real model's answers against the ground truth (`cairn eval --live`): what each
//! call could see (pending steps, how many its input leaves unnamed, its length) and what it
//! did with them (the next step, a later one, wrong arguments, a tool no pending step uses, or
//! "done" with work pending). These are the traces rule 8's slip rates are calibrated from
//! (`crate::trace`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::mind::Mind;
use super::perform::means;
use super::resolve_truth;
use crate::suite::{TaskStep, fact_refs};

/// What one proposed call (or a "done") meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The first pending step, with the right arguments.
    Next,
    /// A later pending step first: a skip or a misorder.
    Later,
    /// A pending step's tool with wrong arguments (an invented or guessed value).
    WrongArgs,
    /// A step already done, again.
    Repeat,
    /// A tool no pending step uses (an unrequested call).
    Other,
    /// "Done" (or an answer, or an empty list) while steps are pending: stopped early.
    Stop,
    /// "Done" with nothing pending.
    Done,
}

/// One judged call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    pub task: String,
    pub repeat: u32,
    pub purpose: String,
    pub milestone: Option<String>,
    /// Characters of prompt and input.
    pub chars: usize,
    pub pending: usize,
    pub unwritten: usize,
    /// The first proposed call's verdict (or `stop`/`done`).
    pub first: Verdict,
    /// For a list: how many distinct pending steps it proposes (all of them, when complete).
    pub covered: Option<usize>,
    /// For a list: every proposed call in order, each judged against the pending steps the
    /// calls before it have not proposed yet (older traces lack it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepJudged>,
}

/// One call of a list, judged in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepJudged {
    /// `next`: the first pending step not proposed earlier in the list; `later`: another one;
    /// `wrong_args`: such a step's tool with wrong arguments; `repeat`: a step done or proposed
    /// already; `other`: a tool no pending step uses.
    pub verdict: Verdict,
    /// The step it was judged against needs a fact its context does not show (it can only
    /// be guessed): the step's own for `next`/`later`, the first unproposed pending step of
    /// that tool for `wrong_args`.
    pub unseen: bool,
}

/// What [`Mind::judge`] makes of one answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Judgement {
    pub pending: usize,
    pub unwritten: usize,
    pub first: Verdict,
    pub covered: Option<usize>,
    pub steps: Vec<StepJudged>,
}

impl Mind<'_> {
    /// Judges `value`, the answer a model gave to a call whose context this mind holds.
    pub(super) fn judge(&self, value: &Value) -> Judgement {
        let pending = self.pending();
        let unwritten = self.unwritten(&pending);
        let stop = if pending.is_empty() {
            Verdict::Done
        } else {
            Verdict::Stop
        };
        let judgement = |first, covered, steps| Judgement {
            pending: pending.len(),
            unwritten,
            first,
            covered,
            steps,
        };
        if value.get("done").and_then(Value::as_bool) == Some(true) {
            return judgement(stop, None, Vec::new());
        }
        if let Some(tool) = value.get("tool").and_then(Value::as_str) {
            let verdict = self.verdict(tool, value.get("args"), &pending);
            return judgement(verdict, None, Vec::new());
        }
        let Some(steps) = value.get("steps").and_then(Value::as_array) else {
            return judgement(stop, None, Vec::new());
        };
        let calls: Vec<(&str, Option<&Value>)> = steps
            .iter()
            .filter_map(|s| Some((s.get("tool")?.as_str()?, s.get("args"))))
            .collect();
        let first = calls
            .first()
            .map(|(tool, args)| self.verdict(tool, *args, &pending))
            .unwrap_or(stop);
        let covered = pending
            .iter()
            .filter(|p| {
                calls
                    .iter()
                    .any(|(tool, args)| self.matches(p, tool, *args))
            })
            .count();
        let judged = self.judge_steps(&calls, &pending);
        judgement(first, Some(covered), judged)
    }

    /// Every call of a list in its place: the pending steps shrink as calls propose them.
    fn judge_steps(
        &self,
        calls: &[(&str, Option<&Value>)],
        pending: &[&TaskStep],
    ) -> Vec<StepJudged> {
        let mut left: Vec<&TaskStep> = pending.to_vec();
        let mut proposed: Vec<&TaskStep> = Vec::new();
        calls
            .iter()
            .map(|(tool, args)| {
                if let Some(at) = left.iter().position(|s| self.matches(s, tool, *args)) {
                    let step = left.remove(at);
                    proposed.push(step);
                    let verdict = if at == 0 {
                        Verdict::Next
                    } else {
                        Verdict::Later
                    };
                    return StepJudged {
                        verdict,
                        unseen: self.unseen(step),
                    };
                }
                if let Some(step) = left.iter().find(|s| s.tool == *tool) {
                    return StepJudged {
                        verdict: Verdict::WrongArgs,
                        unseen: self.unseen(step),
                    };
                }
                let again = self.task.steps.iter().any(|s| self.matches(s, tool, *args));
                let verdict = if again {
                    Verdict::Repeat
                } else {
                    Verdict::Other
                };
                StepJudged {
                    verdict,
                    unseen: false,
                }
            })
            .collect()
    }

    /// Whether `step`'s arguments need a fact the context does not show.
    fn unseen(&self, step: &TaskStep) -> bool {
        step.args.values().flat_map(|t| fact_refs(t)).any(|fact| {
            let truth = self
                .facts
                .get(&fact)
                .map(String::as_str)
                .unwrap_or_default();
            truth.is_empty() || !self.context.contains(truth)
        })
    }

    fn matches(&self, step: &TaskStep, tool: &str, args: Option<&Value>) -> bool {
        step.tool == tool
            && step.args.iter().all(|(name, template)| {
                let given = args.and_then(|a| a.get(name)).map(text).unwrap_or_default();
                means(&given, &resolve_truth(template, &self.facts))
            })
    }

    fn verdict(&self, tool: &str, args: Option<&Value>, pending: &[&TaskStep]) -> Verdict {
        match pending.iter().position(|s| self.matches(s, tool, args)) {
            Some(0) => Verdict::Next,
            Some(_) => Verdict::Later,
            None if pending.iter().any(|s| s.tool == tool) => Verdict::WrongArgs,
            None if self.task.steps.iter().any(|s| self.matches(s, tool, args)) => Verdict::Repeat,
            None => Verdict::Other,
        }
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
