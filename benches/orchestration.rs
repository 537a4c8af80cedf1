//! Orchestration overhead per step, side by side with the peer baselines in
//! `shared/bench/peers` (LangGraph + PostgresSaver, DBOS Transact).
//!
//! Same work as the peers: per task one strategic-plan call, then N steps executed in order,
//! with zero-latency in-process model and tools ([`support::fakes`]), so what is measured is
//! what cairn adds around the calls: claims, leases, the v2 engine's decisions, and one durable
//! Postgres commit per transition (state + event rows + ledger entries + checkpoint), exactly as
//! `cairn serve` runs them (PgStore, reaper, worker pool, v2 engine; no HTTP).
//!
//! Shapes (`SHAPE`): `one_milestone` (default) is the closest to the peers' "the plan returns N
//! steps, then N steps run in order": the strategic plan has one milestone and its tactical
//! plan returns the N steps. `milestones` is N single-step milestones in a dependency chain,
//! which adds a tactical call, a check and a ledger return per step.
//!
//! usage: `cargo bench --bench orchestration -- [TASKS] [STEPS] [CONCURRENCY] [SHAPE]`, or the
//! env variables `TASKS`, `STEPS`, `CONCURRENCY`, `SHAPE` (defaults 200 8 8 one_milestone);
//! `KEEP_DB=1` keeps the benchmark's database instead of dropping it; `PRESUBMIT=1` creates every
//! task before the clock starts. `WIRE=1` puts a counting
//! relay between the stack and Postgres ([`support::wire`]) and reports round trips and
//! statements per step; such a run counts, its time is not comparable (the relay is a hop).
//! Every run reports the write transactions per step (the distinct `xmin` of the event rows).
//! Prints one line in the peers' format on stdout (details on stderr). It asserts that the
//! work was done (every task succeeded with N steps), never anything about speed.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::fakes::{NoopTools, Shape, ZeroModel};
use support::stack::{self, BenchDb, Stack};
use support::wire::WireCounter;

struct Params {
    tasks: usize,
    steps: usize,
    conc: usize,
    shape: Shape,
}

/// Positional arguments win over env variables, which win over defaults. Flags (cargo passes
/// `--bench`) are ignored.
fn params() -> Params {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let pick = |index: usize, env: &str, default: &str| -> String {
        args.get(index)
            .cloned()
            .or_else(|| std::env::var(env).ok())
            .unwrap_or_else(|| default.to_string())
    };
    let number = |index: usize, env: &str, default: &str| -> usize {
        let text = pick(index, env, default);
        match text.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => panic!("{env} must be a positive integer, got {text:?}"),
        }
    };
    let shape_text = pick(3, "SHAPE", "one_milestone");
    let shape = Shape::parse(&shape_text)
        .unwrap_or_else(|| panic!("SHAPE must be one_milestone or milestones, got {shape_text:?}"));
    Params {
        tasks: number(0, "TASKS", "200"),
        steps: number(1, "STEPS", "8"),
        conc: number(2, "CONCURRENCY", "8"),
        shape,
    }
}

/// What a run starts with: the stack, the clock's start, the cluster's next xid at that
/// moment, and the submitter still running (none with `PRESUBMIT=1`).
type Started = (
    Stack,
    Instant,
    i64,
    Option<tokio::task::JoinHandle<Vec<cairn::domain::task::TaskId>>>,
);

/// Starts the stack and the clock. By default the tasks are submitted one at a time while the
/// workers run; `PRESUBMIT=1` creates every task before the clock starts and before any worker
/// runs, to price what the creations' transactions cost the run.
async fn start_run(
    p: &Params,
    config: &cairn::config::Config,
    model: Arc<ZeroModel>,
    observer: &sqlx::PgPool,
) -> Started {
    let tools = Arc::new(NoopTools { hold: None });
    if std::env::var_os("PRESUBMIT").is_some() {
        let store = cairn::server::open_migrated(config)
            .await
            .expect("open the store");
        stack::submit(store.as_ref(), p.tasks).await;
        let xid_before = stack::next_xid(observer).await;
        let t0 = Instant::now();
        return (
            Stack::start_on(config, store, model, tools),
            t0,
            xid_before,
            None,
        );
    }
    let stack = Stack::start(config, model, tools).await;
    let xid_before = stack::next_xid(observer).await;
    let t0 = Instant::now();
    let store = stack.store.clone();
    let tasks = p.tasks;
    let submitting = tokio::spawn(async move { stack::submit(store.as_ref(), tasks).await });
    (stack, t0, xid_before, Some(submitting))
}

#[tokio::main]
async fn main() {
    let p = params();
    let db = BenchDb::create().await;
    let wire = match std::env::var_os("WIRE") {
        Some(_) => Some(WireCounter::start(stack::upstream(&db.url)).await),
        None => None,
    };
    let url = match &wire {
        Some(wire) => stack::through(&db.url, wire.addr),
        None => db.url.clone(),
    };
    let config = stack::config(&url, p.conc);
    let model = Arc::new(ZeroModel {
        shape: p.shape,
        steps: p.steps,
    });
    let observer = stack::observer(&db).await;
    let (stack, t0, xid_before, submitting) = start_run(&p, &config, model, &observer).await;

    let wire_before = wire.as_ref().map(|wire| wire.counts.tally());
    let statements_before = wire.as_ref().map(|wire| wire.counts.statements());
    let all = p.tasks as i64;
    let done = stack::wait_until(
        &observer,
        Duration::from_millis(10),
        Duration::from_secs(1800),
        "every task to end",
        |t| t.terminal == all,
    )
    .await;
    let wall = done.duration_since(t0).as_secs_f64();
    if let Some(submitting) = submitting {
        submitting.await.expect("submitter");
    }
    let xids = stack::next_xid(&observer).await - xid_before;
    let wire_after = wire.as_ref().map(|wire| wire.counts.tally());
    let statements_after = wire.as_ref().map(|wire| wire.counts.statements());

    // The benchmark is only meaningful if the work was really done.
    let tally = stack::tally(&observer).await;
    assert_eq!(tally.succeeded, all, "every task succeeded");
    let steps_done = stack::count_events(&observer, "step.finished").await;
    assert_eq!(steps_done, all * p.steps as i64, "N steps per task");
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&observer)
        .await
        .expect("count events");

    let total_steps = (p.tasks * p.steps) as f64;
    println!(
        "cairn tasks={} steps={} conc={} wall_s={wall:.3} tasks_per_s={:.1} steps_per_s={:.1} \
         ms_per_step={:.3}",
        p.tasks,
        p.steps,
        p.conc,
        p.tasks as f64 / wall,
        total_steps / wall,
        1000.0 * wall / total_steps,
    );
    eprintln!(
        "cairn orchestration: shape={} events={events} ({:.1} per task, {:.0} rows/s), postgres",
        p.shape.as_str(),
        events as f64 / p.tasks as f64,
        events as f64 / wall,
    );

    let total = total_steps;
    let event_tx = stack::event_transactions(&observer).await;
    eprintln!(
        "cairn orchestration: write transactions per step: {:.2} with events in this database \
         ({event_tx}), {:.2} cluster-wide xids ({xids}, other databases' included)",
        event_tx as f64 / total,
        xids as f64 / total,
    );
    if let (Some(before), Some(after)) = (wire_before, wire_after) {
        let per = |after: u64, before: u64| (after - before) as f64 / total;
        eprintln!(
            "cairn orchestration: per step through the counting relay: {:.2} round trips, \
             {:.2} statements, {:.2} bare syncs (pings), {:.3} parses; {} connections \
             (WIRE=1: counted, not timed)",
            per(after.round_trips, before.round_trips),
            per(after.statements, before.statements),
            per(after.pings_or_empty, before.pings_or_empty),
            per(after.parses, before.parses),
            after.connections,
        );
    }
    if let (Some(before), Some(after)) = (statements_before, statements_after) {
        for (label, count) in after {
            let count = count - before.get(&label).copied().unwrap_or(0);
            if count > 0 {
                eprintln!(
                    "cairn orchestration:   {:>7.3} per step  {label}",
                    count as f64 / total
                );
            }
        }
    }

    stack.shutdown().await;
    observer.close().await;
    // KEEP_DB=1 keeps the database for a look at the rows the run wrote.
    if std::env::var_os("KEEP_DB").is_some() {
        eprintln!("cairn orchestration: kept database {}", db.name);
    } else {
        db.drop_database().await;
    }
}
