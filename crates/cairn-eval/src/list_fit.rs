//! What the real model does past the first call of a step list (`Judged::steps`, which older
//! traces lack): the verdicts of the calls after the first, and how often a call that
//! needs a fact no output has shown yet gets it right (the world's `guess_success`, rule 1).
//! The world draws rule 9 once per list; these counts show whether a list that starts right
//! goes on right (docs/evaluation.md, "Past the first call of a list").

use std::fmt::Write as _;

use serde::Serialize;

use super::invent_fit::{answer, chooses};
use super::slip_rates::Answer;
use super::world::{Judged, StepJudged, Verdict};

/// Verdict counts of some calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Verdicts {
    pub calls: u32,
    pub next: u32,
    pub later: u32,
    pub wrong_args: u32,
    pub repeat: u32,
    pub other: u32,
}

impl Verdicts {
    fn add(&mut self, step: &StepJudged) {
        self.calls += 1;
        match step.verdict {
            Verdict::Next => self.next += 1,
            Verdict::Later => self.later += 1,
            Verdict::WrongArgs => self.wrong_args += 1,
            Verdict::Repeat => self.repeat += 1,
            Verdict::Other | Verdict::Stop | Verdict::Done => self.other += 1,
        }
    }
}

/// The counts past the first call of the lists, and the guesses.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ListFit {
    /// Lists judged call by call.
    pub lists: u32,
    /// Lists whose first call proposed a pending step (`next` or `later`).
    pub started_right: u32,
    /// The calls after a right first call, and after a wrong one.
    pub after_right: Verdicts,
    pub after_wrong: Verdicts,
    /// Lists that started right and proposed every pending step of a whole-task list (v1's,
    /// whose scope is the task), of those that started right with two or more pending.
    pub whole_complete: u32,
    pub whole_started_right: u32,
    /// Calls with the right tool for a step whose arguments need an unseen fact: right
    /// arguments (a lucky guess) and wrong ones.
    pub guessed_right: u32,
    pub guessed_wrong: u32,
    /// `guessed_right / (guessed_right + guessed_wrong)`, when there are any.
    pub guess_success: Option<f64>,
    /// The world's `invent_later`: over the later calls of the lists that started right, up to
    /// and including the first invented one (the world's list ends there) and while a pending
    /// step was left to propose, the share that proposed no pending step (another tool, a done
    /// step, or wrong arguments where the facts were in context: a wrong guess is rule 1's).
    pub later_calls: u32,
    pub later_invented: u32,
    pub invent_later: Option<f64>,
}

fn right(verdict: Verdict) -> bool {
    matches!(verdict, Verdict::Next | Verdict::Later)
}

/// Counts every list judged call by call (traces older than the field have none).
pub fn fit_lists(judged: &[Judged]) -> ListFit {
    let mut fit = ListFit::default();
    for j in judged
        .iter()
        .filter(|j| chooses(j) && answer(j) == Answer::List && !j.steps.is_empty())
    {
        fit.lists += 1;
        let started = right(j.steps[0].verdict);
        fit.started_right += u32::from(started);
        for step in &j.steps[1..] {
            if started {
                fit.after_right.add(step);
            } else {
                fit.after_wrong.add(step);
            }
        }
        if started && j.milestone.as_deref() == Some("v1") && j.pending >= 2 {
            fit.whole_started_right += 1;
            let proposed = j.steps.iter().filter(|s| right(s.verdict)).count();
            fit.whole_complete += u32::from(proposed >= j.pending);
        }
        for step in j.steps.iter().filter(|s| s.unseen) {
            if right(step.verdict) {
                fit.guessed_right += 1;
            } else if step.verdict == Verdict::WrongArgs {
                fit.guessed_wrong += 1;
            }
        }
        if started {
            count_later(&mut fit, j);
        }
    }
    fit.invent_later =
        (fit.later_calls > 0).then(|| f64::from(fit.later_invented) / f64::from(fit.later_calls));
    let guesses = fit.guessed_right + fit.guessed_wrong;
    fit.guess_success = (guesses > 0).then(|| f64::from(fit.guessed_right) / f64::from(guesses));
    fit
}

/// The later calls of a list that started right, up to and including the first invented one
/// and while a pending step was left to propose (`ListFit::invent_later`).
fn count_later(fit: &mut ListFit, j: &Judged) {
    let mut proposed = 1;
    for step in &j.steps[1..] {
        if proposed >= j.pending {
            break;
        }
        fit.later_calls += 1;
        let guessed = step.verdict == Verdict::WrongArgs && step.unseen;
        if right(step.verdict) || guessed {
            proposed += 1;
        } else {
            fit.later_invented += 1;
            break;
        }
    }
}

impl ListFit {
    /// The section `slips.md` ends with.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "\n## Past the first call of a list\n\n{} lists judged call by call (traces since \
             2026-12-03), {} of them starting with a pending step.\n\n| calls after | calls | \
             next | later | wrong args | repeat | other |\n|---|---|---|---|---|---|---|\n",
            self.lists, self.started_right
        );
        for (name, v) in [
            ("a right first call", self.after_right),
            ("a wrong first call", self.after_wrong),
        ] {
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {} | {} |",
                v.calls, v.next, v.later, v.wrong_args, v.repeat, v.other
            );
        }
        let _ = writeln!(
            out,
            "\nv1's whole-task lists that started right with two or more steps pending: {} of \
             {} proposed every pending step.\n\nCalls with the right tool for a step whose \
             arguments need a fact no output has shown: {} right (guessed), {} wrong; \
             guess_success = {}.\n\nLater calls of the lists that started right, up to the \
             first invented one: {} invented of {}; invent_later = {}.",
            self.whole_complete,
            self.whole_started_right,
            self.guessed_right,
            self.guessed_wrong,
            rate(self.guess_success),
            self.later_invented,
            self.later_calls,
            rate(self.invent_later)
        );
        out
    }
}

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |g| format!("{g:.2}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(milestone: &str, pending: usize, steps: &[(Verdict, bool)]) -> Judged {
        Judged {
            task: "t".into(),
            repeat: 0,
            purpose: if milestone == "v1" {
                "strategic"
            } else {
                "tactical"
            }
            .into(),
            milestone: Some(milestone.into()),
            chars: 1000,
            pending,
            unwritten: 0,
            first: steps[0].0,
            covered: None,
            steps: steps
                .iter()
                .map(|&(verdict, unseen)| StepJudged { verdict, unseen })
                .collect(),
        }
    }

    #[test]
    fn counts_what_follows_the_first_call_and_the_guesses() {
        use Verdict::*;
        let fit = fit_lists(&[
            list("v1", 3, &[(Next, false), (WrongArgs, true), (Other, false)]),
            list("v1", 2, &[(Next, false), (Next, true)]),
            list("m1", 2, &[(Other, false), (Next, false)]),
            // A move (no list) and an old trace line (no steps) count for nothing.
            list("reactive", 1, &[(Next, false)]),
        ]);
        assert_eq!((fit.lists, fit.started_right), (3, 2));
        assert_eq!(fit.after_right.calls, 3);
        assert_eq!(
            (
                fit.after_right.next,
                fit.after_right.wrong_args,
                fit.after_right.other
            ),
            (1, 1, 1)
        );
        assert_eq!((fit.after_wrong.calls, fit.after_wrong.next), (1, 1));
        assert_eq!((fit.whole_complete, fit.whole_started_right), (1, 2));
        assert_eq!((fit.guessed_right, fit.guessed_wrong), (1, 1));
        assert_eq!(fit.guess_success, Some(0.5));
        // Later calls up to the first invented one: list 1's failed guess counts as proposed,
        // its `other` ends it (2 calls, 1 invented); list 2's right guess (1 call).
        assert_eq!((fit.later_invented, fit.later_calls), (1, 3));
        assert!(fit.markdown().contains("invent_later = 0.33"));
        assert!(fit.markdown().contains("guess_success = 0.50"));
        let none = fit_lists(&[]);
        assert_eq!(none.guess_success, None);
    }
}
