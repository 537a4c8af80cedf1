//! cairn against a real local model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, llama.cpp), installed
//! by `scripts/install-model.sh` into `.deps/` (`scripts/test.sh` runs it). The test fails, never
//! skips, when the model or its server is missing (`CAIRN_LIVE_MODEL`, `CAIRN_LIVE_PYTHON`
//! override the paths).
//!
//! The stack: `scripts/model_server.py` serves the model; an in-process recording proxy sits in
//! front of it and of the simulated tools (`cairn sim`, `scenarios/service_directory.json`: a
//! service directory whose owners no model can guess, and a note sender with side effects);
//! `cairn serve` (SQLite) talks to both through the proxy. Tasks are submitted over the HTTP API
//! and awaited to their terminal state.
//!
//! A 0.5B model is weak, so the test asserts only what must hold whatever the model's quality:
//! - every plan version is valid (ids, checks, dependencies that exist, known tools);
//! - no false success: a task that ends `succeeded` with `verified: true` met its goal in the
//!   simulated world (the tool calls the proxy saw, as the simulator answered them);
//! - side effects at most once: no `write_note` with identical arguments twice in a task, and
//!   the simulator saw a distinct `Idempotency-Key` on every `write_note` request;
//! - every model call asked for structured output: `response_format` of type `json_schema`
//!   with a schema that says more than `{"type": "object"}`;
//! - every task ends within its deadline.
//!
//! Cases: (a) a knowledge question and (b) a one-lookup question (strategy auto), (c) notes to
//! the owners of A and B and (d) a three-milestone dependent chain (strategy v2); with
//! `CAIRN_LIVE_ALL=1` also (e), (c) on the direct route. `CAIRN_LIVE_PARALLEL` (default 1: two tasks
//! sharing two cores slow every call past the client's timeout) tasks run at a time;
//! `CAIRN_LIVE_TASK_DEADLINE_S` (default 300) bounds each. Its wall budget is 150 s less: the
//! engine checks the wall budget between calls, so one model call in flight may run past it.
//!
//! `CAIRN_LIVE_CASES=c,d` runs only the cases whose labels start so. `CAIRN_LIVE_STRICT=1` (for
//! the 1.5B model: `CAIRN_LIVE_MODEL=.deps/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`) also
//! requires the note cases to succeed: an accepted v2 plan, one note per owner, verified;
//! `scripts/test.sh` runs it so on case (c) after the other tests (default deadline 600 s).
//!
//! It prints one summary line per task (status, verified, model calls, tokens, wall time) and
//! one line per model call (purpose, latency, tokens). Logs and every recorded exchange are kept
//! under `target/tmp/live_model/`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod live_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::domain::plan::Plan;
use cairn::domain::plan::known::KnownTools;
use cairn::domain::plan::validate::validate;
use cairn::domain::report::TaskReport;
use live_support::{Exchange, ModelServer, Proxy, Serve, Sim, http, log_dir, root};
use serde_json::{Value, json};

/// The simulated directory (scenarios/service_directory.json).
const OWNERS: &[(&str, &str)] = &[
    ("A", "Priya Raman"),
    ("B", "Tomasz Kowal"),
    ("C", "Dana Okafor"),
];

const TERMINAL: &[&str] = &["succeeded", "failed", "budget_exhausted", "cancelled"];

fn owner(service: &str) -> &'static str {
    OWNERS
        .iter()
        .find(|(s, _)| *s == service)
        .map(|(_, o)| *o)
        .expect("a known service")
}

/// What the simulated world must show for a verified success.
#[derive(Debug, Clone, Copy)]
enum Goal {
    /// A knowledge question: the result names this.
    Answer(&'static str),
    /// Lookups of these services happened and the result names their owners.
    Owners(&'static [&'static str]),
    /// Lookups of `looked_up` happened and a note went to the owner of each of `notified`.
    Notes {
        looked_up: &'static [&'static str],
        notified: &'static [&'static str],
    },
}

#[derive(Debug, Clone, Copy)]
struct Case {
    label: &'static str,
    goal: &'static str,
    strategy: &'static str,
    tokens: u64,
    tool_calls: u64,
    world: Goal,
}

/// The cases run by default; `CAIRN_LIVE_ALL=1` adds [`EXTRA_CASES`].
const CASES: &[Case] = &[
    Case {
        label: "a:knowledge",
        goal: "What is the capital of France?",
        strategy: "auto",
        tokens: 20_000,
        tool_calls: 4,
        world: Goal::Answer("paris"),
    },
    Case {
        label: "b:one-lookup",
        goal: "Look up who owns service A.",
        strategy: "auto",
        tokens: 30_000,
        tool_calls: 6,
        world: Goal::Owners(&["A"]),
    },
    Case {
        label: "c:two-owner-notes",
        goal: "Look up who owns services A and B, then write a note to each owner saying \
               their service will be restarted tonight",
        strategy: "v2",
        tokens: 60_000,
        tool_calls: 10,
        world: Goal::Notes {
            looked_up: &["A", "B"],
            notified: &["A", "B"],
        },
    },
    Case {
        label: "d:three-milestones",
        goal: "First look up who owns service C. Then write a note to that owner saying \
               service C will be restarted tonight. Finally look up who owns service A and \
               write a note to that owner saying that the owner of service C has been told \
               about the restart.",
        strategy: "v2",
        tokens: 60_000,
        tool_calls: 12,
        world: Goal::Notes {
            looked_up: &["C", "A"],
            notified: &["C", "A"],
        },
    },
];

/// (c) on the direct route: longer, so only with `CAIRN_LIVE_ALL=1`.
const EXTRA_CASES: &[Case] = &[Case {
    label: "e:two-owner-notes-direct",
    goal: "Look up who owns services A and B, then write a note to each owner saying \
               their service will be restarted tonight",
    strategy: "direct",
    tokens: 40_000,
    tool_calls: 10,
    world: Goal::Notes {
        looked_up: &["A", "B"],
        notified: &["A", "B"],
    },
}];

/// How one task ended.
#[derive(Debug)]
struct Outcome {
    case: Case,
    id: String,
    task: Value,
    plans: Value,
    wall: Duration,
    timed_out: bool,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

async fn get_json(url: &str) -> Value {
    let response = http().get(url).send().await.expect("GET");
    assert!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    response.json().await.expect("JSON")
}

/// Submits a case over `POST /v1/tasks` and polls it to a terminal state (or the deadline).
async fn run_case(base: String, case: Case, deadline: Duration) -> Outcome {
    let started = Instant::now();
    let response = http()
        .post(format!("{base}/v1/tasks"))
        .json(&json!({
            "goal": case.goal,
            "strategy": case.strategy,
            "budget": {
                "tokens": case.tokens,
                "tool_calls": case.tool_calls,
                "wall_ms": (deadline.as_millis() as u64).saturating_sub(150_000).max(30_000),
            },
            "metadata": {"live_case": case.label},
        }))
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(
        response.status(),
        reqwest::StatusCode::ACCEPTED,
        "POST /v1/tasks for {}",
        case.label
    );
    let created: Value = response.json().await.expect("task JSON");
    let id = created["id"].as_str().expect("task id").to_string();
    println!("live: {} submitted as {id} ({})", case.label, case.strategy);
    let mut timed_out = false;
    let task = loop {
        let task = get_json(&format!("{base}/v1/tasks/{id}")).await;
        let status = task["status"].as_str().unwrap_or_default();
        if TERMINAL.contains(&status) {
            break task;
        }
        if started.elapsed() > deadline {
            timed_out = true;
            let _ = http()
                .post(format!("{base}/v1/tasks/{id}/cancel"))
                .send()
                .await;
            break task;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let wall = started.elapsed();
    let plans = get_json(&format!("{base}/v1/tasks/{id}/plans")).await;
    Outcome {
        case,
        id,
        task,
        plans,
        wall,
        timed_out,
    }
}

/// Whether `text` names `person` (the full name, or either part: the names are unusual).
fn names(text: &str, person: &str) -> bool {
    let text = text.to_lowercase();
    person
        .to_lowercase()
        .split_whitespace()
        .any(|part| text.contains(part))
}

/// Whether `call` is a successful note to the owner of `service` that is about `service`: a
/// note whose text names another service and not its own tells its reader the wrong thing
/// (the 1.5B model once told A's owner that service B would restart, and B's owner that A
/// would, and a count of notes per owner passed it).
fn note_to(call: &Exchange, service: &str) -> bool {
    let text = text_of(&call.args()["text"]).to_lowercase();
    let mentions = |s: &str| text.contains(&format!("service {}", s.to_lowercase()));
    let another = OWNERS
        .iter()
        .any(|(other, _)| *other != service && mentions(other));
    call.is_tool_call("write_note")
        && call.tool_succeeded()
        && names(&text_of(&call.args()["to"]), owner(service))
        && (mentions(service) || !another)
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every plan version is valid: parses, and passes the domain's validation against the
/// registered tools (ids, checks, dependencies that exist, no cycles).
fn check_plans(outcome: &Outcome, tools: &KnownTools, violations: &mut Vec<String>) {
    let label = outcome.case.label;
    for item in outcome.plans["items"].as_array().into_iter().flatten() {
        let version = &item["version"];
        match Plan::from_value(&item["plan"], 20) {
            Err(errors) => violations.push(format!(
                "{label}: plan version {version} does not parse: {errors:?}"
            )),
            Ok(plan) => {
                if let Err(errors) = validate(&plan, tools) {
                    violations.push(format!(
                        "{label}: plan version {version} is invalid: {errors:?}"
                    ));
                }
                let ids: Vec<&str> = plan.milestones.iter().map(|m| m.id.as_str()).collect();
                for milestone in &plan.milestones {
                    if milestone.id.trim().is_empty() {
                        violations.push(format!("{label}: plan {version}: a milestone has no id"));
                    }
                    for dep in &milestone.depends_on {
                        if !ids.contains(&dep.as_str()) {
                            violations.push(format!(
                                "{label}: plan {version}: {} depends on unknown {dep}",
                                milestone.id
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// No false success: a verified success must be backed by the simulated world.
/// Strict mode (`CAIRN_LIVE_STRICT=1`, for a model able to do the work): a note case ran as an
/// accepted v2 plan, sent exactly one note to each owner it names, and ended verified.
fn check_achieved(outcome: &Outcome, calls: &[&Exchange], violations: &mut Vec<String>) {
    let Goal::Notes { notified, .. } = outcome.case.world else {
        return;
    };
    let label = outcome.case.label;
    let report = TaskReport::read(outcome.task.get("result"));
    if !report.verified_success() {
        violations.push(format!(
            "{label}: strict: not a verified success (status {}, reason {})",
            outcome.task["status"], outcome.task["result"]["reason"]
        ));
    }
    if outcome.case.strategy == "v2" && outcome.plans["items"].as_array().is_none_or(Vec::is_empty)
    {
        violations.push(format!("{label}: strict: no accepted plan version"));
    }
    let notes: Vec<&&Exchange> = calls
        .iter()
        .filter(|c| c.is_tool_call("write_note") && c.tool_succeeded())
        .collect();
    for service in notified {
        let to_owner = notes.iter().filter(|c| note_to(c, service)).count();
        if to_owner != 1 {
            violations.push(format!(
                "{label}: strict: {to_owner} notes about {service} to its owner, expected 1"
            ));
        }
    }
    if notes.len() != notified.len() {
        violations.push(format!(
            "{label}: strict: {} write_note calls, expected {}",
            notes.len(),
            notified.len()
        ));
    }
}

fn check_world(outcome: &Outcome, calls: &[&Exchange], violations: &mut Vec<String>) {
    let report = TaskReport::read(outcome.task.get("result"));
    if !report.verified_success() {
        return;
    }
    let label = outcome.case.label;
    let result_text = text_of(&outcome.task["result"]);
    let looked_up = |service: &str| {
        calls.iter().any(|c| {
            c.is_tool_call("lookup")
                && c.tool_succeeded()
                && names(&text_of(&c.response), owner(service))
        })
    };
    let notified = |service: &str| calls.iter().any(|c| note_to(c, service));
    match outcome.case.world {
        Goal::Answer(expected) => {
            if !result_text.to_lowercase().contains(expected) {
                violations.push(format!(
                    "{label}: FALSE SUCCESS: verified, but the result does not say {expected:?}: \
                     {result_text}"
                ));
            }
        }
        Goal::Owners(services) => {
            for service in services {
                if !looked_up(service) {
                    violations.push(format!(
                        "{label}: FALSE SUCCESS: verified, but no lookup of service {service} \
                         returned its owner"
                    ));
                }
                if !names(&result_text, owner(service)) {
                    violations.push(format!(
                        "{label}: FALSE SUCCESS: verified, but the result does not name {} \
                         (owner of {service}): {result_text}",
                        owner(service)
                    ));
                }
            }
        }
        Goal::Notes {
            looked_up: services,
            notified: recipients,
        } => {
            for service in services {
                if !looked_up(service) {
                    violations.push(format!(
                        "{label}: FALSE SUCCESS: verified, but no lookup of service {service} \
                         returned its owner"
                    ));
                }
            }
            for service in recipients {
                if !notified(service) {
                    violations.push(format!(
                        "{label}: FALSE SUCCESS: verified, but no note about service {service} \
                         went to {} (its owner)",
                        owner(service)
                    ));
                }
            }
        }
    }
}

/// Side effects at most once: no `write_note` with identical arguments twice in one task.
fn check_side_effects(outcome: &Outcome, calls: &[&Exchange], violations: &mut Vec<String>) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for call in calls.iter().filter(|c| c.is_tool_call("write_note")) {
        *seen.entry(call.args().to_string()).or_default() += 1;
    }
    for (args, times) in seen.into_iter().filter(|(_, n)| *n > 1) {
        violations.push(format!(
            "{}: write_note sent {times} times with identical arguments {args}",
            outcome.case.label
        ));
    }
}

/// A schema that says more than "an object".
fn non_trivial(schema: &Value) -> bool {
    schema.as_object().is_some_and(|map| {
        map.iter().any(|(key, value)| {
            !matches!(
                key.as_str(),
                "type" | "title" | "description" | "$schema" | "additionalProperties"
            ) && value != &json!({})
                && value != &json!([])
        })
    })
}

/// Why a model request did not carry a structured-output schema, if it did not.
fn schema_problem(call: &Exchange) -> Option<String> {
    let format = call.request.get("response_format");
    let Some(format) = format else {
        return Some("no response_format".into());
    };
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Some(format!("response_format type is not json_schema: {format}"));
    }
    let schema = &format["json_schema"]["schema"];
    (!non_trivial(schema)).then(|| format!("trivial schema {schema}"))
}

fn check_schemas(model_calls: &[&Exchange], violations: &mut Vec<String>) {
    let bad: Vec<(&&Exchange, String)> = model_calls
        .iter()
        .filter_map(|c| schema_problem(c).map(|p| (c, p)))
        .collect();
    if bad.is_empty() {
        return;
    }
    let mut by_purpose: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for (call, problem) in &bad {
        let entry = by_purpose
            .entry(call.purpose.clone().unwrap_or_else(|| "?".into()))
            .or_insert((0, problem.clone()));
        entry.0 += 1;
    }
    let detail: Vec<String> = by_purpose
        .iter()
        .map(|(purpose, (n, example))| format!("{purpose}: {n} (e.g. {example})"))
        .collect();
    violations.push(format!(
        "{} of {} model calls did not ask for a non-trivial json_schema response_format: {}",
        bad.len(),
        model_calls.len(),
        detail.join("; ")
    ));
}

fn summary(outcome: &Outcome, model_calls: &[&Exchange], tool_calls: &[&Exchange]) -> String {
    let report = TaskReport::read(outcome.task.get("result"));
    let (mut prompt, mut completion, mut total, mut model_ms, mut max_ms) = (0, 0, 0, 0, 0);
    for call in model_calls {
        let (p, c, t) = call.usage().unwrap_or_default();
        prompt += p;
        completion += c;
        total += t;
        model_ms += call.latency_ms;
        max_ms = max_ms.max(call.latency_ms);
    }
    let gone = model_calls.iter().filter(|c| c.client_gone).count();
    let count = |tool: &str| tool_calls.iter().filter(|c| c.is_tool_call(tool)).count();
    let status = outcome.task["status"].as_str().unwrap_or("?");
    format!(
        "live: {:<26} status={status}{} verified={} route={} plan_versions={} model_calls={} \
         (abandoned {gone}) tokens={total} (prompt {prompt}, completion {completion}) model_time={:.1}s \
         (max {:.1}s) tool_calls: lookup={} write_note={} wall={:.1}s reason={:?}",
        outcome.case.label,
        if outcome.timed_out {
            " (TIMED OUT)"
        } else {
            ""
        },
        report
            .verified
            .map_or("null".to_string(), |v| v.to_string()),
        report
            .route()
            .map_or("-".to_string(), |r| format!("{r:?}").to_lowercase()),
        outcome.plans["items"].as_array().map_or(0, Vec::len),
        model_calls.len(),
        model_ms as f64 / 1000.0,
        max_ms as f64 / 1000.0,
        count("lookup"),
        count("write_note"),
        outcome.wall.as_secs_f64(),
        report.reason.unwrap_or_default(),
    )
}

fn print_calls(label: &str, model_calls: &[&Exchange]) {
    for call in model_calls {
        let (p, c, _) = call.usage().unwrap_or_default();
        println!(
            "live:   {label} call #{} {} milestone={} attempt={} http={} {} ms{} prompt={p} \
             completion={c} schema={}",
            call.seq,
            call.purpose.as_deref().unwrap_or("?"),
            call.milestone.as_deref().unwrap_or("-"),
            call.attempt.as_deref().unwrap_or("-"),
            call.status,
            call.latency_ms,
            if call.client_gone {
                " (cairn gave up)"
            } else {
                ""
            },
            schema_problem(call).map_or("ok".to_string(), |_| "MISSING".to_string()),
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the local model (scripts/install-model.sh); scripts/test.sh runs it"]
async fn a_real_model_runs_tasks_without_false_success() {
    let all_started = Instant::now();
    // Strict: the model must be good enough to achieve the note cases (the 1.5B model).
    let strict = std::env::var("CAIRN_LIVE_STRICT").is_ok_and(|v| v == "1");
    let parallel = env_u64("CAIRN_LIVE_PARALLEL", 1).max(1);
    // The 1.5B model needs about 35 s per plan on two cores, and a four-milestone plan makes
    // six calls.
    let default_deadline = if strict { 600 } else { 300 };
    let deadline =
        Duration::from_secs(env_u64("CAIRN_LIVE_TASK_DEADLINE_S", default_deadline).max(60));

    let model = ModelServer::start(parallel as u32, 8192 * parallel as u32).await;
    println!(
        "live: model {} loaded in {:.1}s at {}",
        model.model.display(),
        model.load_time.as_secs_f64(),
        model.base_url
    );
    let model_name = model
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().trim_end_matches("-q4_k_m").to_string())
        .unwrap_or_else(|| "local-model".into());
    let sim = Sim::start(&root().join("scenarios/service_directory.json")).await;
    let proxy = Proxy::start(&model.base_url, &sim.base_url).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let tools_file = dir.path().join("tools.json");
    let tool_names = sim.write_registry(&proxy.base_url, &tools_file).await;
    let known_tools = KnownTools::new(tool_names.iter().cloned());
    let db = dir.path().join("cairn.db");
    let serve = Serve::start(
        &db,
        &[
            ("CAIRN_LLM_DEFAULT_BASE_URL", proxy.base_url.as_str()),
            ("CAIRN_LLM_DEFAULT_MODEL", model_name.as_str()),
            ("CAIRN_TOOLS_FILE", tools_file.to_str().expect("utf-8 path")),
            ("CAIRN_WORKERS", &parallel.to_string()),
            // The server answers `parallel` calls at a time: milestones run in parallel beyond
            // that only queue behind each other, and each waiting call's latency is charged to
            // its milestone's wall-clock allocation (measured: a four-milestone plan ran out of
            // wall_ms in 92 s at 4, and succeeded at 1).
            ("CAIRN_ENGINE_MAX_PARALLEL", &parallel.to_string()),
            ("CAIRN_POLL_INTERVAL_MS", "200"),
            // A CPU-bound local model writes a plan in minutes; a retry after a timeout only
            // queues behind the abandoned generation on a single-slot server.
            ("CAIRN_LLM_TIMEOUT_MS", "300000"),
        ],
    )
    .await;
    println!(
        "live: cairn serve at {}, tools via {} (sim {}), logs in {}",
        serve.base_url,
        proxy.base_url,
        sim.base_url,
        log_dir().display()
    );

    // Run the cases, `parallel` at a time, in order.
    let permits = Arc::new(tokio::sync::Semaphore::new(parallel as usize));
    let mut running = Vec::new();
    let all = std::env::var("CAIRN_LIVE_ALL").is_ok_and(|v| v == "1");
    let extra: &[Case] = if all { EXTRA_CASES } else { &[] };
    let only = std::env::var("CAIRN_LIVE_CASES").unwrap_or_default();
    let chosen = |case: &&Case| {
        only.trim().is_empty()
            || only
                .split(',')
                .any(|prefix| case.label.starts_with(prefix.trim()))
    };
    for case in CASES.iter().chain(extra).filter(chosen) {
        let permit = permits.clone().acquire_owned().await.expect("semaphore");
        let base = serve.base_url.clone();
        let case = *case;
        running.push(tokio::spawn(async move {
            let outcome = run_case(base, case, deadline).await;
            drop(permit);
            outcome
        }));
    }
    let mut outcomes = Vec::new();
    for handle in running {
        outcomes.push(handle.await.expect("case task"));
    }

    let open = proxy.settle(Duration::from_secs(150)).await;
    let records = proxy.records();
    std::fs::write(
        log_dir().join("exchanges.json"),
        serde_json::to_vec_pretty(&records).expect("JSON"),
    )
    .expect("write exchanges.json");
    let stats = sim.stats().await;
    let mut violations = Vec::new();

    println!();
    for outcome in &outcomes {
        let mine: Vec<&Exchange> = records
            .iter()
            .filter(|r| r.task.as_deref() == Some(outcome.id.as_str()))
            .collect();
        let model_calls: Vec<&Exchange> =
            mine.iter().copied().filter(|r| r.is_model_call()).collect();
        let tool_calls: Vec<&Exchange> = mine
            .iter()
            .copied()
            .filter(|r| r.upstream == "tools")
            .collect();
        println!("{}", summary(outcome, &model_calls, &tool_calls));
        let report = TaskReport::read(outcome.task.get("result"));
        if report.verified == Some(true) && !report.verified_success() {
            // Not a false success (the task did not succeed), but a report worth a look.
            println!(
                "live:   NOTE {}: ended {} with verified=true",
                outcome.case.label, outcome.task["status"]
            );
        }
        print_calls(outcome.case.label, &model_calls);
        if outcome.timed_out {
            violations.push(format!(
                "{}: did not end within {deadline:?} (status {})",
                outcome.case.label, outcome.task["status"]
            ));
        }
        check_plans(outcome, &known_tools, &mut violations);
        check_world(outcome, &tool_calls, &mut violations);
        check_side_effects(outcome, &tool_calls, &mut violations);
        if strict {
            check_achieved(outcome, &tool_calls, &mut violations);
        }
    }
    let model_calls: Vec<&Exchange> = records.iter().filter(|r| r.is_model_call()).collect();
    check_schemas(&model_calls, &mut violations);
    if open > 0 {
        violations.push(format!(
            "{open} forwarded request(s) still had no answer at the end; the records are incomplete"
        ));
    }
    let notes = &stats["tools"]["write_note"];
    println!("live: sim tools {}", stats["tools"]);
    if notes["calls"] != notes["distinct_keys"] {
        violations.push(format!(
            "the simulator saw {} write_note requests but {} distinct Idempotency-Keys",
            notes["calls"], notes["distinct_keys"]
        ));
    }
    let untagged = records
        .iter()
        .filter(|r| r.is_model_call() && r.task.is_none())
        .count();
    println!(
        "live: {} model calls in all ({} without a task header), total wall {:.1}s",
        model_calls.len(),
        untagged,
        all_started.elapsed().as_secs_f64()
    );

    drop(serve);
    drop(proxy);
    drop(sim);
    drop(model);
    assert!(
        violations.is_empty(),
        "{} live-model assertion(s) failed:\n- {}\n(logs and exchanges in {})",
        violations.len(),
        violations.join("\n- "),
        log_dir().display()
    );
}
