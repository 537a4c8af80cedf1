//! # cairn: a durable planning service for LLM agents
//!
//! A guided tour, in the order a task travels:
//!
//! 1. [`config`] reads typed settings (defaults < file < `CAIRN_*` env) and [`clock`] supplies
//!    time, so tests can move it by hand.
//! 2. [`app`] builds the HTTP router; [`http`] holds one file per resource (tasks, events over
//!    SSE, plans, health). Errors become `application/problem+json` in [`error`].
//! 3. `POST /v1/tasks` writes a task row and its first event through a [`store::Store`], which
//!    has a Postgres and an embedded SQLite implementation that pass one conformance suite.
//! 4. The [`worker`] pool claims runnable tasks under a fenced lease, heartbeats, and hands each
//!    one to an [`engine::Engine`]. The reaper requeues expired leases, also at start-up, so
//!    tasks of a crashed process resume by themselves. [`server`] ties store, reaper, pool and
//!    HTTP into the `cairn serve` lifecycle, including graceful shutdown.
//! 5. The engine (`engine::v2`) decides (gate), plans ([`domain`] holds plans, checks, the
//!    ledger and the repair ladder as pure, typed data), and executes by calling models through
//!    [`llm`] and tools through [`tools`]; every transition is an event committed with the state
//!    it describes. `engine::strategies` holds the baselines it is measured against.
//! 6. [`sim`] serves a scripted OpenAI-compatible model and tool endpoints for tests, the demo
//!    and the evaluation; everything it produces is labelled as simulated.
//! 7. [`eval`] runs task suites through every strategy side by side and runs shadow copies of
//!    real tasks against sandboxed tools; [`rollout`] sends a sticky share of `auto` tasks to v2
//!    and refuses to raise it while the latest evaluation shows a regression.

pub mod clock;
pub mod config;
pub mod domain;
pub mod engine;
pub mod eval;
pub mod http;
pub mod llm;
pub mod schema;
pub mod secret;
pub mod server;
pub mod sim;
pub mod store;
pub mod tools;
pub mod wiring;
pub mod worker;
