//! Rule 8: slips, a model losing track of work it was not shown. Off unless the suite's
//! `[world.slips]` sets rates (docs/evaluation.md, "Slips"); the functional forms are fixed here,
//! the values are calibrated from the real local model's traces before a suite uses them.
//!
//! Every call is judged by what it can see: the pending steps in its scope that its input does
//! not name (`unwritten`: a plan or a current milestone names them; a bare goal does not) and
//! the length of its input. The same forms apply to every strategy:
//!
//! - **stop early**: with probability `stop_base + stop_per_unwritten * unwritten +
//!   stop_per_kchar * chars / 1000` (at most 1), a call that would propose the next step says it
//!   is done instead (one step per call), or ends its list after the first step (a list);
//! - **misorder**: with probability `misorder_per_unwritten * unwritten` (at most 1), a call
//!   proposes the pending step after the next one first; the world refuses it when it needs the
//!   skipped one, and a model that has seen that refusal (`order:STEP`) does not repeat it.

use super::mind::Mind;
pub use crate::suite::SlipRates;
use crate::suite::TaskStep;

/// What a call does with the pending steps of its scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pick {
    /// Act on the pending step at this index.
    Step(usize),
    /// Say it is done although steps are pending.
    Stop,
}

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
