//! HTTP resources, one file per resource, each handler documented with `#[utoipa::path]` and
//! registered through `utoipa_axum::routes!` in [`router`], so the OpenAPI document is
//! generated from the very routes that serve requests and cannot drift from them.
//!
//! - [`tasks`]: submit (with `Idempotency-Key`), read, list (keyset pages), cancel;
//! - [`messages`]: a person's messages to a running task (steering);
//! - [`events`]: a task's events over SSE (replay, then live) or as a JSON page;
//! - [`plans`]: immutable plan versions; [`plan_diff`]: what each version changed;
//! - [`ledger`]: a task's budget ledger, derived from its entries;
//! - [`stats`]: planner telemetry and the gate's decisions with outcomes;
//! - [`tools`]: the registered tools;
//! - [`health`]: `/healthz`, `/readyz`, `/openapi.json`;
//! - [`extract`]: extractors and fallbacks that turn every rejection into a problem;
//! - [`limits`], [`guard`], [`conn`]: timeouts, connection, rate and stream limits.
//!
//! Every protected route is scoped to the tenant of the caller's API key ([`auth`]).

pub mod approvals;
pub mod artifacts;
pub mod auth;
pub mod auth_doc;
pub mod auth_start;
pub mod conn;
mod conn_io;
pub mod cursor;
pub mod dashboard;
pub mod doc_schemas;
pub mod error;
pub mod events;
pub mod extract;
pub mod guard;
pub mod health;
pub mod idempotency;
pub mod ledger;
pub mod limits;
pub mod limits_doc;
pub mod messages;
pub mod metrics;
pub mod plain;
pub mod plan_diff;
pub mod plans;
pub mod rollout;
pub mod router;
pub mod shadow;
pub mod state;
pub mod stats;
pub mod stream_token;
pub mod tasks;
pub mod tools;
pub mod tools_doc;

pub use limits::HttpLimits;
pub use router::{openapi, openapi_json, router, serve};
pub use state::{AppState, HttpSettings, ShutdownSignal};
