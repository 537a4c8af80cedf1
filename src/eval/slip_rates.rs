//! The slip rates of a suite's `[world.slips]` (rules 8 and 9 of the world).

use serde::{Deserialize, Serialize};

/// The slip rates of `[world.slips]` (rule 8 of the world, `crate::eval::world::slips`); all 0
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

    /// The chance a fresh call invents a call: with nothing pending, or with steps pending.
    pub fn invent(&self, nothing_pending: bool) -> f64 {
        if nothing_pending {
            self.invent_idle
        } else {
            self.invent_base
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
        ]
        .iter()
        .all(|r| (0.0..=1.0).contains(r))
    }
}
