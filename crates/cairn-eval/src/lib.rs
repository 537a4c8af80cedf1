//! Evaluation: every strategy on one suite, side by side, through the real service path.
//!
//! - [`suite`]: task suites as files (goal, category, ground-truth steps, injected fault);
//! - [`world`]: the simulated model and tools every strategy shares; its behaviour is the
//!   explicit, seeded rule set documented there and in `docs/evaluation.md`;
//! - [`runner`]: `cairn eval`: store, worker pool, HTTP API and world in one process, each
//!   run submitted and followed over HTTP;
//! - [`compose`]: `cairn eval` composed from the product's parts (store, worker pool, HTTP
//!   API, engines over the world's tools);
//! - [`report`]: per-run records, aggregates, regressions and the report files;
//! - [`resume`]: the log of finished runs that lets `cairn eval --resume` go on where a long
//!   (live) evaluation stopped;
//! - [`sweep`]: one world parameter over several values, success per strategy against it;
//! - [`trace`]: a live run's model answers judged against the ground truth, for calibrating
//!   the world's slip rates.
//! - [`calls`]: every live model call stored whole (`calls.jsonl`) and read back, call by call
//!   (`cairn eval calls`).

pub mod calls;
pub mod compose;
pub mod drive;
pub mod error;
pub mod invent_fit;
pub mod list_fit;
mod lsq;
pub mod report;
pub mod resume;
pub mod routed;
pub mod runner;
mod slip_rates;
pub mod suite;
pub mod sweep;
pub mod trace;
pub mod world;
