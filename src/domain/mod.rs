//! The domain: plain data and pure rules, free of I/O.
//!
//! Nothing here touches sqlx, axum or reqwest. Tasks, events and leases describe what the store
//! keeps; plans, milestones, checks, the ledger and the gate describe what the engine decides.
//! This is the most unit- and property-tested part of cairn.

pub mod check;
pub mod event;
pub mod fingerprint;
pub mod ledger;
pub mod plan;
pub mod task;
pub mod validate;
