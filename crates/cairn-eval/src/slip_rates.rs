//! The slip rates of a suite's `[world.slips]` (rules 8, 9 and 10 of the world).

use serde::{Deserialize, Serialize};

/// The slip rates of `[world.slips]` (rule 8 of the world, `crate::world::slips`); all 0
/// (no slips) by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlipRates {
    #[serde(default)]
    pub stop_base: f64,
    #[serde(default)]
    pub stop_per_unwritten: f64,
    #[serde(default)]
    pub stop_per_kchar: f64,
    #[serde(default)]
    pub misorder_per_unwritten: f64,
    /// Rule 9: the chance a call with nothing left to do makes a needless call anyway.
    #[serde(default)]
    pub invent_idle: f64,
    /// Rule 9: the chance a call with steps pending makes an invented call instead of the next.
    #[serde(default)]
    pub invent_base: f64,
    /// Rule 9: the chance a call whose context shows an invented call makes it again.
    #[serde(default)]
    pub invent_repeat: f64,
    /// Rule 9 for calls asked for one move (an act loop's round) rather than a list of steps:
    /// `invent_idle` and `invent_base` of such calls; unset, the list rates apply to both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invent_move_idle: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invent_move_base: Option<f64>,
    /// Rule 9 for a fresh call with steps pending whose next step's arguments are all written
    /// in its input (the goal states them, or an output it was shown holds them): the chance
    /// it invents, for lists and moves alike; unset, `invent_base` (or `invent_move_base`)
    /// applies whether or not they are written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invent_stated: Option<f64>,
    /// Rule 9 for a fresh call with nothing pending because its work is done (the outputs of
    /// its steps are in its input), not because it needs none: the chance it makes a needless
    /// call instead of answering; unset, `invent_idle` (or `invent_move_idle`) applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invent_done: Option<f64>,
    /// Rule 9 past the first call of a list: the chance each later step of a list whose first
    /// call was not invented is replaced by an invented call, which ends the list.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub invent_later: f64,
    /// Rule 10, a plan's slips: the chance a tool some step of the task needs is granted to
    /// no milestone of the plan (v2 offers a milestone's tactical call only its milestone's
    /// tools, so that step cannot be taken under the plan).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub plan_tool_miss: f64,
    /// Rule 10: the chance a milestone's acceptance check names an artifact no tool produces
    /// (the real model names artifacts it has not seen), so the check cannot pass.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub plan_accept_miss: f64,
}

fn is_zero(rate: &f64) -> bool {
    *rate == 0.0
}

/// The kind of answer a call that chooses what to do is asked for: part of what the call can
/// see (its own contract), so a rate that differs between them still applies identically to
/// every strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// A list of steps (a milestone's steps, v1's list, a plan).
    List,
    /// One move of an act loop (a reactive or direct round).
    Move,
}

/// What a fresh call (one whose context shows no invented call) can see of its work: rule 9's
/// rate depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fresh {
    /// Nothing pending and nothing done: a question no step serves.
    Idle,
    /// Nothing pending: its steps are done.
    Done,
    /// Steps pending; the next one's arguments are not all written in its input.
    Pending,
    /// Steps pending; the next one's arguments are all written in its input.
    Stated,
}

impl SlipRates {
    /// The chance a call stops early with `unwritten` pending steps unnamed and `chars` of input.
    pub fn stop(&self, unwritten: usize, chars: usize) -> f64 {
        let p = self.stop_base
            + self.stop_per_unwritten * unwritten as f64
            + self.stop_per_kchar * chars as f64 / 1000.0;
        p.clamp(0.0, 1.0)
    }

    /// The chance a call proposes the step after the next one first.
    pub fn misorder(&self, unwritten: usize) -> f64 {
        (self.misorder_per_unwritten * unwritten as f64).clamp(0.0, 1.0)
    }

    /// The chance a fresh call asked for `answer`, in state `fresh`, invents a call.
    pub fn invent(&self, fresh: Fresh, answer: Answer) -> f64 {
        let special = match fresh {
            Fresh::Stated => self.invent_stated,
            Fresh::Done => self.invent_done,
            Fresh::Idle | Fresh::Pending => None,
        };
        if let Some(rate) = special {
            return rate;
        }
        let (idle, base) = match answer {
            Answer::List => (self.invent_idle, self.invent_base),
            Answer::Move => (
                self.invent_move_idle.unwrap_or(self.invent_idle),
                self.invent_move_base.unwrap_or(self.invent_base),
            ),
        };
        match fresh {
            Fresh::Idle | Fresh::Done => idle,
            Fresh::Pending | Fresh::Stated => base,
        }
    }

    /// Every rate is a probability or a per-unit rate within 0..=1.
    pub fn valid(&self) -> bool {
        [
            self.stop_base,
            self.stop_per_unwritten,
            self.stop_per_kchar,
            self.misorder_per_unwritten,
            self.invent_idle,
            self.invent_base,
            self.invent_repeat,
            self.invent_move_idle.unwrap_or(0.0),
            self.invent_move_base.unwrap_or(0.0),
            self.invent_stated.unwrap_or(0.0),
            self.invent_done.unwrap_or(0.0),
            self.invent_later,
            self.plan_tool_miss,
            self.plan_accept_miss,
        ]
        .iter()
        .all(|r| (0.0..=1.0).contains(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_call_invents_at_its_states_rate_and_the_pooled_rates_stand_in_where_unset() {
        let pooled = SlipRates {
            invent_idle: 0.9,
            invent_base: 0.8,
            invent_move_base: Some(0.7),
            ..Default::default()
        };
        let rates = |fresh, answer| pooled.invent(fresh, answer);
        assert_eq!(rates(Fresh::Done, Answer::List), 0.9);
        assert_eq!(rates(Fresh::Stated, Answer::List), 0.8);
        assert_eq!(rates(Fresh::Stated, Answer::Move), 0.7);
        let split = SlipRates {
            invent_stated: Some(0.3),
            invent_done: Some(0.5),
            ..pooled
        };
        assert_eq!(split.invent(Fresh::Idle, Answer::List), 0.9);
        assert_eq!(split.invent(Fresh::Done, Answer::Move), 0.5);
        assert_eq!(split.invent(Fresh::Pending, Answer::Move), 0.7);
        assert_eq!(split.invent(Fresh::Stated, Answer::Move), 0.3);
        assert!(split.valid());
        assert!(
            !SlipRates {
                invent_done: Some(1.5),
                ..split
            }
            .valid()
        );
    }
}
