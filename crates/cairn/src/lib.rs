//! # cairn: a durable planning service for LLM agents
//!
//! The code is laid out in floors; a module imports only floors below it (`tests/layers.rs`
//! fails on a forbidden import or a cycle). Lowest first:
//!
//! | floor | modules |
//! |---|---|
//! | pure domain | [`domain`]: tasks, plans, checks, validation, the ledger, gate rules, the repair ladder, fingerprints, diffs, reports, telemetry, settings and the one event catalog |
//! | ports | [`clock`], [`schema`], [`secret`], [`meters`] (what `GET /metrics` shows); [`llm`] (OpenAI-compatible client), [`store`] (one trait, Postgres and SQLite), [`tools`] (registry, HTTP client, receipts) |
//! | engine | [`engine`]: the contract with the pool, the shared runtime, v2, the baselines, the rollout and the one dispatch |
//! | worker | [`worker`]: pool, lease heartbeat, reaper |
//! | sim | [`sim`] (scripted model and tools for scenario demos and tests, ports only) |
//! | http | [`http`]: state, router, one file per resource, problem+json errors |
//! | root | [`config`] composes every module's settings; [`wiring`] is the one composition root; [`server`] is the `cairn serve` lifecycle; `main.rs` the thin CLI |
//!
//! A guided tour, in the order a task travels:
//!
//! 1. `cairn serve` ([`server`]) reads the [`config::Config`] (defaults < file < `CAIRN_*`), and
//!    [`wiring`] builds from it the store, the model and tool clients (the in-process simulator
//!    when no model is configured) and the engines behind one [`engine::dispatch::Dispatch`].
//!    Only the root reads the whole configuration; every module takes its own settings type.
//! 2. `POST /v1/tasks` ([`http::tasks`]) validates the goal and writes the task row and its
//!    first event through a [`store::Store`] in one transaction; bad input is a problem+json 4xx
//!    ([`http::error`]) and writes nothing.
//! 3. The [`worker`] pool claims the task under a fenced lease, heartbeats, and hands it to the
//!    dispatch, which picks the engine by strategy, rollout arm (a resumed task goes back to the
//!    engine its checkpoint is tagged with) and shadow flag. The reaper requeues expired leases,
//!    also at start-up: that is how tasks of a crashed process resume.
//! 4. Every engine runs on [`engine::runtime`]: the [`engine::runtime::journal::Journal`]
//!    commits each transition (state, events, ledger entries, artifacts, plan version) in one
//!    fenced transaction; an [`engine::runtime::attempt::Attempt`] asks models and calls tools
//!    through [`engine::runtime::ports`] and charges what they cost.
//! 5. The v2 engine ([`engine::planner`]) decides with the gate (direct act loop or plan), plans
//!    milestones with acceptance checks, writes each milestone's steps just in time, executes
//!    one approved step at a time, lets the monitor alone judge, repairs on the domain's ladder
//!    (L1 retry step, L2 replan milestone, L3 replan strategy) and verifies the goal. The
//!    [`engine::baselines`] (one_shot, reactive, v1) run on the same runtime.
//! 6. Clients follow the events over SSE ([`http::events`]); every kind is listed with its
//!    payload in [`domain::event::kinds`]. The result is a [`domain::report::TaskReport`], which
//!    the statistics ([`domain::telemetry`]) and the evaluation read back typed.
//! 7. [`sim`] serves a scripted OpenAI-compatible model and tools for tests and the demo;
//!    [`engine::shadow`] runs shadow copies of real tasks against sandboxed tools; the rollout
//!    ([`engine::rollout`]) refuses to raise v2's share while the latest evaluation report
//!    shows a regression. The evaluation itself (task suites through every strategy side by
//!    side, the simulated world, traces) is the `cairn-eval` crate, which depends on this one
//!    and never the reverse.

pub mod clock;
pub mod config;
pub mod domain;
pub mod engine;
pub mod http;
pub mod llm;
pub mod meters;
pub mod schema;
pub mod secret;
pub mod server;
pub mod sim;
pub mod store;
pub mod tools;
pub mod traces;
pub mod wiring;
pub mod worker;
