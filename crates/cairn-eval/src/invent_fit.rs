//! Fitting rule 9 (invented calls, `crate::world`) from a live trace: how often a call
//! that chooses what to do invents a call, with nothing pending (`invent_idle`) or with steps
//! pending (`invent_base`), and how often a call right after an invented one makes an invented
//! call again (`invent_repeat`). "Right after" is read off the act loop's rounds (the reactive
//! baseline's calls of one run follow each other in the trace); every other call counts as a
//! fresh one, so a re-ask after an invented list raises `invent_base` rather than
//! `invent_repeat` (docs/evaluation.md, "Calibrating the slips").

use std::collections::BTreeMap;

use serde::Serialize;

use super::slip_rates::Answer;
use super::world::{Judged, Verdict};

/// Calls and invented calls among them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Tally {
    pub calls: u32,
    pub invented: u32,
}

impl Tally {
    fn add(&mut self, invented: bool) {
        self.calls += 1;
        self.invented += u32::from(invented);
    }

    fn rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            f64::from(self.invented) / f64::from(self.calls)
        }
    }
}

/// The counts behind rule 9's rates, and the rates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct InventFit {
    /// Fresh calls with nothing pending.
    pub idle: Tally,
    /// Fresh calls with steps pending.
    pub pending: Tally,
    /// Act-loop calls right after an invented call.
    pub after: Tally,
    pub invent_idle: f64,
    pub invent_base: f64,
    pub invent_repeat: f64,
}

/// A call that chooses what to do next: a step list or an act-loop move (not the gate, not a
/// plan of milestones, not the verifier, not one_shot's answer).
pub(super) fn chooses(j: &Judged) -> bool {
    match (j.purpose.as_str(), j.milestone.as_deref()) {
        ("tactical", Some("one_shot")) => false,
        ("tactical", _) => true,
        ("strategic", Some("v1")) => true,
        _ => false,
    }
}

pub(super) fn answer(j: &Judged) -> Answer {
    match j.milestone.as_deref() {
        Some("reactive" | "direct") => Answer::Move,
        _ => Answer::List,
    }
}

/// Rule 9 fitted over the calls asked for each kind of answer apart (in trace order, so an act
/// loop's rounds still follow each other): where the pooled rates hide a difference.
pub fn fit_invent_by_answer(judged: &[Judged]) -> Vec<(Answer, InventFit)> {
    [Answer::List, Answer::Move]
        .into_iter()
        .map(|kind| {
            let calls: Vec<Judged> = judged
                .iter()
                .filter(|j| chooses(j) && answer(j) == kind)
                .cloned()
                .collect();
            (kind, fit_invent(&calls))
        })
        .collect()
}

/// Rule 9's rates as a suite states them, from the pooled fit and the fits by answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Rule9 {
    pub invent_idle: f64,
    pub invent_base: f64,
    pub invent_repeat: f64,
    pub invent_move_idle: Option<f64>,
    pub invent_move_base: Option<f64>,
}

/// Lists and moves apart where both were seen in a state (else the pooled rate stands for
/// both); the repeat rate is the act loop's, which only moves have.
pub(super) fn rule9_rates(pooled: &InventFit, by_answer: &[(Answer, InventFit)]) -> Rule9 {
    let of = |answer| {
        by_answer
            .iter()
            .find(|(a, _)| *a == answer)
            .map(|(_, f)| *f)
            .unwrap_or_default()
    };
    let (list, moves) = (of(Answer::List), of(Answer::Move));
    let apart = |lists: Tally, mv: Tally, pooled: f64, list_rate: f64, move_rate: f64| {
        if lists.calls > 0 && mv.calls > 0 {
            (list_rate, Some(move_rate))
        } else {
            (pooled, None)
        }
    };
    let (invent_idle, invent_move_idle) = apart(
        list.idle,
        moves.idle,
        pooled.invent_idle,
        list.invent_idle,
        moves.invent_idle,
    );
    let (invent_base, invent_move_base) = apart(
        list.pending,
        moves.pending,
        pooled.invent_base,
        list.invent_base,
        moves.invent_base,
    );
    let invent_repeat = if moves.after.calls > 0 {
        moves.invent_repeat
    } else {
        pooled.invent_repeat
    };
    Rule9 {
        invent_idle,
        invent_base,
        invent_repeat,
        invent_move_idle,
        invent_move_base,
    }
}

/// A call no pending step needed: another tool, invented arguments, or a step already done.
/// A done step again counts as invented, not as a right call (earlier fits counted it right):
/// the world's counterpart of a call that is not invented proposes a pending step, and a done
/// one again moves nothing forward (docs/evaluation.md, "Calibrating the slips").
fn invented(j: &Judged) -> bool {
    matches!(
        j.first,
        Verdict::Other | Verdict::WrongArgs | Verdict::Repeat
    )
}

/// Fits rule 9 over `judged`, in trace order.
pub fn fit_invent(judged: &[Judged]) -> InventFit {
    let mut fit = InventFit::default();
    let mut last_round: BTreeMap<(String, u32), bool> = BTreeMap::new();
    // The expected fresh rate of each call counted in `after`, filled in once the fresh rates
    // are known: (nothing pending, invented).
    let mut after: Vec<(bool, bool)> = Vec::new();
    for j in judged.iter().filter(|j| chooses(j)) {
        let now = invented(j);
        let previous = if j.milestone.as_deref() == Some("reactive") {
            last_round.insert((j.task.clone(), j.repeat), now)
        } else {
            None
        };
        if previous == Some(true) {
            fit.after.add(now);
            after.push((j.pending == 0, now));
        } else if j.pending == 0 {
            fit.idle.add(now);
        } else {
            fit.pending.add(now);
        }
    }
    fit.invent_idle = fit.idle.rate();
    fit.invent_base = fit.pending.rate();
    // P(invented | after) = q + (1 - q) p, with p the fresh rate of the call's own state.
    let (mut num, mut den) = (0.0, 0.0);
    for (idle, now) in after {
        let p = if idle {
            fit.invent_idle
        } else {
            fit.invent_base
        };
        num += f64::from(u8::from(now)) - p;
        den += 1.0 - p;
    }
    fit.invent_repeat = if den > 1e-9 {
        (num / den).clamp(0.0, 1.0)
    } else {
        0.0
    };
    fit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(milestone: &str, pending: usize, first: Verdict) -> Judged {
        Judged {
            task: "t".into(),
            repeat: 0,
            purpose: "tactical".into(),
            milestone: Some(milestone.into()),
            chars: 100,
            pending,
            unwritten: 0,
            first,
            covered: None,
            steps: Vec::new(),
        }
    }

    #[test]
    fn fresh_rates_and_the_repeat_rate_are_told_apart() {
        // An act loop: a fresh invented call, then two more in a row, then the answer.
        let mut trace = vec![
            call("reactive", 0, Verdict::Other),
            call("reactive", 0, Verdict::Other),
            call("reactive", 0, Verdict::Other),
            call("reactive", 0, Verdict::Done),
        ];
        // Milestone lists: one invented of two fresh calls with steps pending, and a done step
        // proposed again, which moves nothing forward either.
        trace.push(call("m1", 2, Verdict::WrongArgs));
        trace.push(call("m1", 2, Verdict::Next));
        trace.push(call("m1", 2, Verdict::Repeat));
        let fit = fit_invent(&trace);
        assert_eq!(
            fit.idle,
            Tally {
                calls: 1,
                invented: 1
            }
        );
        assert_eq!(
            fit.pending,
            Tally {
                calls: 3,
                invented: 2
            }
        );
        assert_eq!(
            fit.after,
            Tally {
                calls: 3,
                invented: 2
            }
        );
        assert_eq!(fit.invent_idle, 1.0);
        assert!((fit.invent_base - 2.0 / 3.0).abs() < 1e-12);
        // With p = 1 for idle calls nothing separates q from p: the fit does not invent one.
        assert_eq!(fit.invent_repeat, 0.0);
    }

    #[test]
    fn the_repeat_rate_is_what_exceeds_the_fresh_rate() {
        let mut trace = Vec::new();
        for _ in 0..2 {
            trace.push(call("m1", 1, Verdict::Other));
            trace.push(call("m1", 1, Verdict::Next));
            trace.push(call("m1", 1, Verdict::Next));
            trace.push(call("m1", 1, Verdict::Next));
        }
        // Fresh rate with steps pending: 2 of 8 = 0.25. After an invented call: 3 of 4.
        trace.push(call("reactive", 1, Verdict::Next));
        trace.push(call("reactive", 1, Verdict::Other));
        trace.push(call("reactive", 1, Verdict::Other));
        trace.push(call("reactive", 1, Verdict::Other));
        trace.push(call("reactive", 1, Verdict::Other));
        trace.push(call("reactive", 1, Verdict::Next));
        let fit = fit_invent(&trace);
        assert_eq!(
            fit.pending,
            Tally {
                calls: 10,
                invented: 3
            }
        );
        assert_eq!(
            fit.after,
            Tally {
                calls: 4,
                invented: 3
            }
        );
        let p = 0.3;
        let expected = (3.0 - 4.0 * p) / (4.0 * (1.0 - p));
        assert!((fit.invent_repeat - expected).abs() < 1e-9, "{fit:?}");
    }
    #[test]
    fn lists_and_moves_are_fitted_apart() {
        let judged = vec![
            call("m1", 1, Verdict::Other),
            call("m1", 1, Verdict::Other),
            call("reactive", 1, Verdict::Next),
            call("reactive", 1, Verdict::Other),
            call("v1", 0, Verdict::Done),
        ];
        let fits = fit_invent_by_answer(&judged);
        assert_eq!(fits[0].0, Answer::List);
        assert_eq!(
            fits[0].1.pending,
            Tally {
                calls: 2,
                invented: 2
            }
        );
        assert_eq!(
            fits[0].1.idle,
            Tally {
                calls: 1,
                invented: 0
            }
        );
        assert_eq!(fits[1].0, Answer::Move);
        assert_eq!(
            fits[1].1.pending,
            Tally {
                calls: 2,
                invented: 1
            }
        );
        assert_eq!(fits[1].1.after, Tally::default());
    }
}
