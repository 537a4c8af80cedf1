//! The scenario files under `scenarios/` and the simulator serving them: every file loads; the
//! worked example replays its figures (docs/scenarios.md, "The worked example") through the real
//! clients and the domain's ledger; invalid-plan faults produce plans the domain refuses; the
//! direct question and the generic mode do real work; everything is labelled simulated; stats and
//! the registry file are served over HTTP.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn::clock::SystemClock;
use cairn::domain::ledger::{Ledger, LedgerPolicy, PerUnit, Unit};
use cairn::domain::plan::known::KnownTools;
use cairn::domain::plan::validate::{PlanLimits, validate, validate_steps};
use cairn::domain::plan::{Plan, StepList};
use cairn::llm::{
    ChatMessage, ChatRequest, Completion, Endpoints, LlmClient, Purpose, RetryPolicy,
};
use cairn::sim::{Scenario, SimServer, SimStats};
use cairn::tools::{MemoryReceipts, Repeat, ToolCall, ToolClient, ToolRegistry, ToolResult};
use serde_json::{Value, json};
use uuid::Uuid;

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

async fn sim(name: &str) -> SimServer {
    let scenario = Scenario::load(&scenarios_dir().join(name)).expect("scenario loads");
    SimServer::start(scenario, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("sim starts")
}

/// The real clients, pointed at a simulator.
struct Clients {
    llm: LlmClient,
    tools: ToolClient,
    task: Uuid,
}

impl Clients {
    fn new(server: &SimServer) -> Clients {
        let policy = RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(10),
            timeout: Duration::from_secs(10),
            ..RetryPolicy::default()
        };
        Clients {
            llm: LlmClient::new(Endpoints::uniform(server.llm_endpoint()), policy).expect("llm"),
            tools: ToolClient::new(
                server.registry(),
                Some(Arc::new(MemoryReceipts::default())),
                Arc::new(SystemClock),
            ),
            task: Uuid::now_v7(),
        }
    }

    async fn ask(&self, purpose: Purpose, milestone: Option<(&str, u32)>) -> Completion {
        let mut request = ChatRequest::new(
            purpose,
            vec![ChatMessage::user(
                "Rename config key db.url to db.dsn in services A, B, C",
            )],
        )
        .task(self.task)
        .json_output(purpose.as_str(), json!({"type": "object"}));
        if let Some((id, attempt)) = milestone {
            request = request.milestone(id, attempt);
        }
        let answer = self.llm.complete(&request).await.expect("model answers");
        assert!(
            answer.simulated && answer.model == "cairn-sim",
            "labelled simulated"
        );
        answer
    }

    /// Calls `tool` as the engine would for a step's first occurrence in its list.
    async fn tool(&self, tool: &str, args: &Value) -> ToolResult {
        let call = ToolCall {
            task_id: self.task,
            tool: tool.into(),
            args: args.clone(),
            repeat: Repeat::Nth(0),
            sandbox: false,
        };
        let result = self.tools.call(&call).await.expect("tool answers");
        assert!(result.simulated, "labelled simulated");
        result
    }
}

#[test]
fn every_scenario_file_loads_and_says_what_it_is() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(scenarios_dir()).expect("scenarios/") {
        let path = entry.expect("entry").path();
        let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            !scenario.description.is_empty(),
            "{} has no description",
            path.display()
        );
        assert_eq!(
            Some(scenario.name.as_str()),
            path.file_stem().and_then(|s| s.to_str())
        );
        names.push(scenario.name);
    }
    for required in [
        "worked_example",
        "direct_question",
        "fault_http_500",
        "fault_rate_limit",
        "fault_hang",
        "fault_malformed_json",
        "fault_truncated_body",
        "invalid_plan_cycle",
        "invalid_plan_unknown_dependency",
        "invalid_plan_duplicate_id",
        "invalid_plan_unknown_tool",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "scenarios/ lacks {required}"
        );
    }
}

#[test]
fn a_bad_scenario_is_refused_with_its_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.json");
    std::fs::write(
        &path,
        r#"{"name": "bad", "tools": [{"name": "run", "description": "d", "side_effects": false,
            "rules": [{"after": [{"tool": "edit_file"}], "output": 1}]}]}"#,
    )
    .expect("write");
    let error = Scenario::load(&path).expect_err("edit_file is not defined");
    assert!(error.to_string().contains("tools.run.rules[0]"), "{error}");
    std::fs::write(
        &path,
        r#"{"name": "bad", "replies": [{"purpose": "gate", "fault": {"kind": "http_404"}}]}"#,
    )
    .expect("write");
    assert!(Scenario::load(&path).is_err());
}

/// Executes a milestone's step list and then its command check; returns the check's exit code.
async fn run_milestone(clients: &Clients, plan: &Value, id: &str, steps: &Value) -> i64 {
    let milestone = plan["milestones"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["id"] == id))
        .expect("milestone in plan");
    let typed = Plan::from_value(plan, 10).expect("plan parses");
    let list: StepList = serde_json::from_value(steps.clone()).expect("steps parse");
    validate_steps(
        &list.steps,
        typed.milestone(id).expect("milestone"),
        &PlanLimits::default(),
    )
    .expect("steps valid for the milestone");
    for step in &list.steps {
        clients.tool(&step.tool, &step.args).await;
    }
    let accept = &milestone["accept"];
    assert_eq!(accept["type"], "command");
    let check = clients.tool("run", &accept["args"]).await;
    check.output["exit_code"].as_i64().expect("exit code")
}

#[tokio::test]
async fn the_worked_example_replays_the_seed_figures() {
    let server = sim("worked_example.json").await;
    let clients = Clients::new(&server);
    let mut overhead = 0u64;
    let mut spent: BTreeMap<&str, u64> = BTreeMap::new();

    let gate = clients.ask(Purpose::Gate, None).await;
    overhead += gate.usage.total_tokens;
    let features = gate.json.expect("json");
    assert_eq!(
        (
            features["touches_writes"].clone(),
            features["targets"].clone()
        ),
        (json!(true), json!(3))
    );

    let strategic = clients.ask(Purpose::Strategic, None).await;
    overhead += strategic.usage.total_tokens;
    let plan_json = strategic.json.expect("plan");
    let plan = Plan::from_value(&plan_json, 10).expect("plan parses");
    validate(&plan, &KnownTools::new(server.registry().names())).expect("the plan is valid");
    assert_eq!(
        plan.shares(),
        vec![
            ("m1".into(), 1),
            ("m2".into(), 2),
            ("m3".into(), 2),
            ("m4".into(), 2)
        ]
    );

    // The ledger, as the engine keeps it: overhead (gate, strategic) is charged to the reserve.
    let totals = PerUnit {
        tokens: 200_000,
        tool_calls: 1_000,
        wall_ms: 3_600_000,
        cost: 0,
    };
    let (mut ledger, _) =
        Ledger::allocate(totals, &plan.shares(), &LedgerPolicy::default()).expect("allocate");
    let tokens = |n| PerUnit {
        tokens: n,
        tool_calls: 0,
        wall_ms: 0,
        cost: 0,
    };
    assert_eq!(ledger.book(Unit::Tokens).reserve, 40_000);
    assert_eq!(
        ledger.account("m1", Unit::Tokens).expect("m1").allocated,
        22_857
    );
    for id in ["m2", "m3", "m4"] {
        assert_eq!(
            ledger.account(id, Unit::Tokens).expect("m").allocated,
            45_714
        );
    }
    ledger.charge_overhead(tokens(overhead)).expect("overhead");

    // m1: search; its artifact misses c/start.sh.
    let m1 = clients.ask(Purpose::Tactical, Some(("m1", 1))).await;
    let steps: StepList = serde_json::from_value(m1.json.clone().expect("steps")).expect("steps");
    let search = clients.tool("search", &steps.steps[0].args).await;
    assert_eq!(
        search.artifacts["usage_list"].as_array().map(Vec::len),
        Some(3)
    );
    *spent.entry("m1").or_default() += m1.usage.total_tokens;
    ledger
        .charge("m1", tokens(m1.usage.total_tokens))
        .expect("charge");
    ledger.return_unspent("m1").expect("return");
    assert_eq!(
        ledger.book(Unit::Tokens).reserve + overhead,
        53_857,
        "reserve after m1 (+ overhead)"
    );

    // m2 and m3 pass first time.
    for id in ["m2", "m3"] {
        let answer = clients.ask(Purpose::Tactical, Some((id, 1))).await;
        assert_eq!(
            run_milestone(&clients, &plan_json, id, &answer.json.expect("steps")).await,
            0
        );
        *spent.entry(id).or_default() += answer.usage.total_tokens;
        ledger
            .charge(id, tokens(answer.usage.total_tokens))
            .expect("charge");
        ledger.return_unspent(id).expect("return");
    }

    // m4: first steps and the L1 retry fail the check (c/start.sh); the L2 re-plan passes.
    let mut grants = 0;
    for (attempt, expected_exit) in [(1, 1), (2, 1), (3, 0)] {
        let answer = clients.ask(Purpose::Tactical, Some(("m4", attempt))).await;
        let exit = run_milestone(&clients, &plan_json, "m4", &answer.json.expect("steps")).await;
        assert_eq!(exit, expected_exit, "m4 attempt {attempt}");
        *spent.entry("m4").or_default() += answer.usage.total_tokens;
        let charged = ledger
            .charge("m4", tokens(answer.usage.total_tokens))
            .expect("charge");
        assert!(!charged.is_exhausted());
        if attempt == 2 {
            assert!(
                ledger.used("m4").expect("used").tokens >= 0.8,
                "the L1 retry takes m4 past 80% of its allocation"
            );
        }
        grants = ledger.account("m4", Unit::Tokens).expect("m4").granted;
    }
    assert_eq!(
        grants, 6_286,
        "the monitor grants m4 6,286 from the reserve"
    );

    let verdict = clients.ask(Purpose::Verifier, None).await;
    overhead += verdict.usage.total_tokens;
    assert_eq!(verdict.json.expect("verdict")["verdict"], "pass");

    assert_eq!(
        spent,
        BTreeMap::from([
            ("m1", 9_000),
            ("m2", 44_500),
            ("m3", 44_500),
            ("m4", 52_000)
        ])
    );
    assert_eq!(spent.values().sum::<u64>(), 150_000);
    assert_eq!(overhead, 2_200);
    let stats: SimStats = server.stats();
    assert_eq!(stats.llm.tokens, 152_200);
    assert_eq!(stats.llm.calls, 9);
    // Side-effecting edits: one per step, never repeated by a resend.
    let edits = &stats.tools["edit_file"];
    assert_eq!(edits.calls, edits.distinct_keys);
}

#[tokio::test]
async fn invalid_plan_faults_are_refused_by_plan_validation_then_fixed() {
    for (flaw, expected) in [
        ("cycle", "cycle"),
        ("unknown_dependency", "m404"),
        ("duplicate_id", "more than once"),
        ("unknown_tool", "teleport"),
    ] {
        let server = sim(&format!("invalid_plan_{flaw}.json")).await;
        let clients = Clients::new(&server);
        let known = KnownTools::new(server.registry().names());
        let first = clients
            .ask(Purpose::Strategic, None)
            .await
            .json
            .expect("json");
        let errors = match Plan::from_value(&first, 10) {
            Ok(plan) => validate(&plan, &known).expect_err("the first plan is invalid"),
            Err(errors) => errors,
        };
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            shown.iter().any(|e| e.contains(expected)),
            "{flaw}: expected {expected:?} in {shown:?}"
        );
        let second = clients
            .ask(Purpose::Strategic, None)
            .await
            .json
            .expect("json");
        let plan = Plan::from_value(&second, 10).expect("parses");
        validate(&plan, &known).unwrap_or_else(|e| panic!("{flaw}: second plan invalid: {e:?}"));
    }
}

#[tokio::test]
async fn the_direct_question_takes_one_tool_call() {
    let server = sim("direct_question.toml").await;
    let clients = Clients::new(&server);
    let gate = clients.ask(Purpose::Gate, None).await.json.expect("json");
    assert_eq!(
        gate,
        json!({"est_tool_calls": 1, "touches_writes": false, "targets": 1, "goal_kind": "lookup"})
    );
    let first = clients.ask(Purpose::Tactical, Some(("direct", 1))).await;
    let steps: StepList = serde_json::from_value(first.json.expect("json")).expect("steps");
    assert_eq!(steps.steps.len(), 1);
    let result = clients
        .tool(&steps.steps[0].tool, &steps.steps[0].args)
        .await;
    assert_eq!(result.artifacts["version"], "2.4.1");
    let done = clients
        .ask(Purpose::Tactical, Some(("direct", 2)))
        .await
        .json
        .expect("json");
    assert_eq!(done["done"], true);
    assert!(done["answer"].as_str().is_some_and(|a| a.contains("2.4.1")));
    assert_eq!(server.stats().tools["get_version"].calls, 1);
}

#[tokio::test]
async fn the_generic_mode_plans_and_works_over_generic_tools() {
    let server = SimServer::start(Scenario::generic(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("sim");
    let clients = Clients::new(&server);
    let registry: &ToolRegistry = &server.registry();
    assert!(registry.specs().all(|spec| spec.simulated));

    let gate = clients.ask(Purpose::Gate, None).await.json.expect("json");
    assert_eq!(gate["touches_writes"], true, "rename is a write");
    let plan_json = clients
        .ask(Purpose::Strategic, None)
        .await
        .json
        .expect("json");
    let plan = Plan::from_value(&plan_json, 10).expect("parses");
    validate(&plan, &KnownTools::new(registry.names())).expect("the generic plan is valid");
    for (id, artifact) in [("m1", "findings"), ("m2", "note")] {
        let answer = clients.ask(Purpose::Tactical, Some((id, 1))).await;
        assert!(!answer.usage.estimated && answer.usage.total_tokens > 0);
        let steps: StepList = serde_json::from_value(answer.json.expect("json")).expect("steps");
        validate_steps(
            &steps.steps,
            plan.milestone(id).expect("m"),
            &PlanLimits::default(),
        )
        .expect("steps valid");
        let step = &steps.steps[0];
        let result = clients.tool(&step.tool, &step.args).await;
        assert!(
            result
                .artifacts
                .get(artifact)
                .is_some_and(|v| v != &Value::Null),
            "{id} produced {artifact}"
        );
    }
    let direct = clients
        .ask(Purpose::Tactical, Some(("direct", 2)))
        .await
        .json
        .expect("json");
    assert_eq!(direct["done"], true);
    let verdict = clients
        .ask(Purpose::Verifier, None)
        .await
        .json
        .expect("json");
    assert_eq!(verdict["verdict"], "pass");
}

#[tokio::test]
async fn stats_reset_and_the_registry_file_are_served_over_http() {
    let server = sim("worked_example.json").await;
    let clients = Clients::new(&server);
    clients.ask(Purpose::Gate, None).await;
    let http = reqwest::Client::new();
    let stats: SimStats = http
        .get(format!("{}/sim/stats", server.base_url()))
        .send()
        .await
        .expect("stats")
        .json()
        .await
        .expect("json");
    assert!(stats.simulated);
    assert_eq!(
        (stats.scenario.as_str(), stats.llm.calls),
        ("worked_example", 1)
    );

    let text = http
        .get(format!("{}/sim/registry.json", server.base_url()))
        .send()
        .await
        .expect("registry")
        .text()
        .await
        .expect("text");
    let registry = ToolRegistry::parse_json(&text, "served").expect("a registry file");
    assert_eq!(registry.names(), server.registry().names());
    let run = registry.get("run").expect("run");
    assert_eq!(run.spec.url, format!("{}/tools/run", server.base_url()));

    let reset = http
        .post(format!("{}/sim/reset", server.base_url()))
        .send()
        .await
        .expect("reset");
    assert!(reset.status().is_success());
    assert_eq!(server.stats().llm.calls, 0);
}
