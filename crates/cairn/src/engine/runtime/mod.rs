//! What every strategy shares, so the baselines and v2 are measured on the same machinery.
//!
//! - [`ports`]: the engine's two doors to the outside ([`ports::ModelPort`], [`ports::ToolPort`]);
//!   [`adapters`] put them over the real LLM and tool clients, [`sandbox`] over the sandboxed
//!   tools of a shadow run, [`receipted`] puts the tool client's receipts in front of any
//!   other tool port (the evaluation's world).
//! - [`checkpoint`]: the task's resumable state and the [`journal::Journal`], the one door
//!   through which a transition (state + events + ledger + artifacts + plan version) is
//!   committed, fenced, in one transaction ([`journal`]: transitions with nothing external
//!   between them share one commit).
//! - [`attempt`]: the [`attempt::Attempt`] of one run at a task: journal, ports, settings, the
//!   tool registry, and the two ways of spending budget (asking a model, calling a tool).
//! - [`approvals`]: what a person must sign off before a call or a plan runs, and parking the
//!   task while they decide.
//! - [`ledger`]: charging spend to the books and persisting the movements; [`reserve`]:
//!   sizing each call to what the books have left before it is sent.
//! - [`turns`]: an act loop's observations as a conversation with the model.

pub mod adapters;
pub mod approvals;
pub mod attempt;
pub mod checkpoint;
pub mod journal;
pub mod ledger;
pub mod ports;
pub mod progress;
pub mod receipted;
pub mod reserve;
pub mod sandbox;
pub mod signoff;
pub mod turns;
