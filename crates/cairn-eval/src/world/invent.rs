//! Rule 9: invented calls, the real small model's commonest failure (docs/evaluation.md,
//! "Calibrating the slips"): asked what to do next, it calls a tool no pending step uses, or
//! the right tool with arguments nothing in its context holds, and it calls a question's tool
//! although the question needs none. Off unless the suite's `[world.slips]` sets rates.
//!
//! The same forms apply to every strategy and depend only on what the call can see:
//!
//! - a call whose context shows an invented call (its `invented-N` marker, in a call or in the
//!   tool's answer) makes the last one again with probability `invent_repeat`, as a model at
//!   temperature 0 repeats itself;
//! - otherwise it invents a new one with probability `invent_idle` when nothing is pending
//!   (instead of answering) and `invent_base` when steps are pending (instead of the next),
//!   or, for a call asked for one move of an act loop rather than a list of steps,
//!   `invent_move_idle` and `invent_move_base` where the suite sets them (the real model
//!   invents far less in a single move: docs/evaluation.md); and where the suite sets
//!   `invent_stated`, a call whose next step's arguments are all written in its input (the
//!   goal states them, or an output it was shown holds them) invents at that rate instead,
//!   lists and moves alike (the real model gets such a call right far more often), and where
//!   it sets `invent_done`, a call with nothing pending because its steps are done (not a
//!   question that needs none) makes a needless call at that rate instead of answering.
//!
//! - in a list whose first call was not invented, each later pending step is replaced by an
//!   invented call with probability `invent_later`, and the list ends there (a list that
//!   starts right need not go on right: docs/evaluation.md, "Past the first call of a list").
//!
//! An invented call names an offered tool no step of the task uses (drawn per marker), or,
//! when every offered tool is some step's, the first pending step's tool with invented
//! arguments; the world answers it `not found`, so it changes nothing but the context. Every
//! draw is keyed by the task's progress and the markers in context: the same context gives the
//! same answer. The progress is where the call's scope starts ([`Mind::scope_at`]): keyed by
//! the number of steps pending instead, every single-step milestone of a task drew the same
//! number, so a task whose first milestone was listed right had every later one listed right.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::LOCATE;
use super::mind::Mind;
use crate::slip_rates::{Answer, Fresh};
use crate::suite::{TaskStep, fact_refs};

const MARKER: &str = "invented-";

impl Mind<'_> {
    /// The distinct invented markers in context, and how often any of them appears.
    fn invented_marks(&self) -> (BTreeSet<usize>, usize) {
        let mut distinct = BTreeSet::new();
        let mut seen = 0;
        for (at, _) in self.context.match_indices(MARKER) {
            let digits: String = self.context[at + MARKER.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<usize>() {
                distinct.insert(n);
                seen += 1;
            }
        }
        (distinct, seen)
    }

    /// The invented call this call makes instead of its next step (or its answer), if any.
    pub(super) fn invented(
        &self,
        pending: &[&TaskStep],
        tools: &[String],
        answer: Answer,
    ) -> Option<Value> {
        let (distinct, seen) = self.invented_marks();
        let progress = self.scope_at(pending);
        if let Some(last) = distinct.last()
            && self.draw(&format!("slip-again-{seen}"), progress) < self.slips.invent_repeat
        {
            return self.invented_call(*last, pending, tools);
        }
        // Done as the live trace counts it: the task's steps all done (a milestone whose own
        // steps are done while others are pending is not, and stays at the idle rate).
        let fresh = match pending.first() {
            None if !self.task.steps.is_empty() && self.pending().is_empty() => Fresh::Done,
            None => Fresh::Idle,
            Some(step) if self.stated(step) => Fresh::Stated,
            Some(_) => Fresh::Pending,
        };
        let rate = self.slips.invent(fresh, answer);
        if rate > 0.0 && self.draw(&format!("slip-invent-{seen}"), progress) < rate {
            return self.invented_call(distinct.len(), pending, tools);
        }
        None
    }

    /// Whether every argument of `step` is written in the call's input: a literal argument as
    /// it stands (the goal states it), an argument built from facts by the facts' values (an
    /// output the call was shown holds them). Rule 9's `invent_stated` applies to such a step.
    fn stated(&self, step: &TaskStep) -> bool {
        step.args.values().all(|template| {
            let facts = fact_refs(template);
            if facts.is_empty() {
                return self.written(template);
            }
            facts.iter().all(|fact| {
                self.facts
                    .get(fact)
                    .is_some_and(|truth| !truth.is_empty() && self.written(truth))
            })
        })
    }

    /// Whether `text` is in the input as a word of its own (`ci` is not in "Decide").
    fn written(&self, text: &str) -> bool {
        let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        self.context.match_indices(text).any(|(at, _)| {
            !alnum(self.context[..at].chars().next_back())
                && !alnum(self.context[at + text.len()..].chars().next())
        })
    }

    /// The invented call a list makes in place of `step`, a later pending step, if any.
    pub(super) fn invented_later(
        &self,
        step: &TaskStep,
        pending: &[&TaskStep],
        tools: &[String],
    ) -> Option<Value> {
        if self.slips.invent_later <= 0.0 {
            return None;
        }
        let (distinct, seen) = self.invented_marks();
        let at = self.task.steps.iter().position(|s| s.id == step.id)?;
        if self.draw(&format!("slip-later-{seen}"), at) >= self.slips.invent_later {
            return None;
        }
        let from = pending.iter().position(|s| s.id == step.id).unwrap_or(0);
        self.invented_call(distinct.len(), &pending[from..], tools)
    }

    /// What a call makes of a pending step whose tool it is not offered (rule 10): a model
    /// answering under the call's schema can name only offered tools, so it makes an invented
    /// call with one of them (an offered tool no step uses, or an offered step's tool with
    /// invented arguments); `None` when it is offered no such tool.
    pub(super) fn unoffered(&self, pending: &[&TaskStep], tools: &[String]) -> Option<Value> {
        let (distinct, _) = self.invented_marks();
        self.invented_call(distinct.len(), pending, tools)
    }

    /// Invented call number `n`: an offered tool no step uses, else a step's tool with
    /// arguments no fact holds (`None` when no such call exists).
    fn invented_call(&self, n: usize, pending: &[&TaskStep], tools: &[String]) -> Option<Value> {
        let marker = format!("{MARKER}{n}");
        let unused: Vec<&String> = tools
            .iter()
            .filter(|t| t.as_str() != LOCATE && !self.task.steps.iter().any(|s| &s.tool == *t))
            .collect();
        if !unused.is_empty() {
            let pick = (self.draw("slip-tool", n) * unused.len() as f64).floor() as usize;
            let tool = unused[pick.min(unused.len() - 1)];
            return Some(
                json!({"id": marker, "tool": tool, "args": {"query": marker},
                               "expected_output": "an answer"}),
            );
        }
        let step = pending
            .iter()
            .copied()
            .chain(self.task.steps.iter())
            .find(|s| !s.args.is_empty() && tools.contains(&s.tool))?;
        let args: Map<String, Value> = step
            .args
            .keys()
            .map(|name| (name.clone(), json!(marker)))
            .collect();
        Some(json!({"id": marker, "tool": step.tool, "args": args,
                    "expected_output": "an answer"}))
    }
}
