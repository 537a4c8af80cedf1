//! Rule 8: slips, a model losing track of work it was not shown. Off unless the suite's
//! `[world.slips]` sets rates (docs/evaluation.md, "Slips"); the functional forms are fixed here,
//! the values are calibrated from the real local model's traces before a suite uses them.
//!
//! Every call is judged by what it can see: the pending steps in its scope that its input does
//! not name (`unwritten`: a plan or a current milestone names them; a bare goal does not) and
//! the length of its input (`Mind::pick` draws them). The same forms apply to every strategy:
//!
//! - **stop early**: with probability `stop_base + stop_per_unwritten * unwritten +
//!   stop_per_kchar * chars / 1000` (at most 1), a call that would propose the next step says it
//!   is done instead (one step per call), or ends its list after the first step (a list);
//! - **misorder**: with probability `misorder_per_unwritten * unwritten` (at most 1), a call
//!   proposes the pending step after the next one first; the world refuses it when it needs the
//!   skipped one, and a model that has seen that refusal (`order:STEP`) does not repeat it.

pub use crate::suite::SlipRates;

/// What a call does with the pending steps of its scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pick {
    /// Act on the pending step at this index.
    Step(usize),
    /// Say it is done although steps are pending.
    Stop,
}
