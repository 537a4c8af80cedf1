//! The domain: plain data and pure rules, free of I/O.
//!
//! Nothing here touches sqlx, axum or reqwest. Tasks, events and leases describe what the store
//! keeps; plans, milestones, checks, the ledger and the gate describe what the engine decides.
//! This is the most unit- and property-tested part of cairn (`tests/domain_props.rs`).
//!
//! The planning engine's pure half, in the order a task meets it:
//! - [`gate`]: plan or act, from the gate model's features or a heuristic over the goal text;
//! - [`plan`] and [`check`]: the plan as typed data, and how an acceptance check is judged;
//! - [`validate`]: what a planner's output must satisfy before anything runs;
//! - [`ledger`]: reserve, allocations by effort, charges, grants and returns, as movements;
//! - [`fingerprint`] and [`repair`]: the repair ladder and the guard against repeated proposals;
//! - [`diff`]: what changed between two plan versions.

pub mod approval;
pub mod dialect;
pub mod event;
pub mod gate;
pub mod grounding;
pub mod instant;
pub mod ledger;
pub mod message;
pub mod plan;
pub mod price;
pub mod progress;
pub mod repair;
pub mod report;
pub mod settings;
pub mod spend;
pub mod step_repeats;
pub mod task;
pub mod telemetry;
pub mod whole;
