//! The API fuzz test: schemathesis (pinned by sha256, installed into `.deps/schemathesis` by
//! `scripts/install-schemathesis.sh`, which `scripts/test.sh` runs) fuzzes a live `cairn serve`
//! (the real binary on 127.0.0.1:0, the embedded SQLite default, the built-in simulated model and
//! tools, authentication enforced with an API key of tenant `default`) from the OpenAPI document
//! it serves, with every check, and fails on any finding: a 5xx, a request without (or with a
//! wrong) key accepted, a status or header the document does not list, a response that violates
//! its schema, a schema-valid request refused
//! or a schema-violating one accepted. So the document states exactly what the server does.
//!
//! The run is seeded and bounded by a case budget, so a failure reproduces: the report printed on
//! failure has a `curl` line per finding. `CAIRN_FUZZ_SEED` and `CAIRN_FUZZ_MAX_EXAMPLES` change
//! the seed and the budget for a deeper local run; `CAIRN_SCHEMATHESIS_BIN` points at another
//! schemathesis. The configuration (`tests/api_fuzz.toml`) enables every check and holds the one
//! documented exception, with its reason.
//!
//! The second test checks, without schemathesis, that the goal's documented pattern and the
//! server's goal rule agree on every string.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use cairn::domain::task::{Budget, BudgetRequest};
use cairn::http::tasks::CreateTaskRequest;
use proptest::prelude::*;
use serve_process::{Db, Serve};

/// The default seed: fixed, so CI and a local run generate the same cases.
const SEED: &str = "20261201";
/// Cases per operation and phase: about 2,800 cases in 50-80 s on two cores.
const MAX_EXAMPLES: &str = "200";
/// A run past this is a failure in itself (a hung request or a runaway phase).
const WALL_LIMIT: Duration = Duration::from_secs(420);

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `CAIRN_SCHEMATHESIS_BIN`, else `.deps/schemathesis/bin/schemathesis`; a missing one fails the
/// test with what to run (never a silent skip).
fn schemathesis_bin() -> PathBuf {
    let path = std::env::var_os("CAIRN_SCHEMATHESIS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join(".deps/schemathesis/bin/schemathesis"));
    assert!(
        path.is_file(),
        "schemathesis not found at {}: run scripts/install-schemathesis.sh (scripts/test.sh \
         does), or set CAIRN_SCHEMATHESIS_BIN to a schemathesis 4.32.5 binary",
        path.display()
    );
    path
}

/// The headers every fuzz request carries, as `Name: value`: the one place that says how the
/// test authenticates. schemathesis also sends requests without them, or with them altered, and
/// expects the 401s the document lists.
fn request_headers(key: &str) -> Vec<String> {
    vec![format!("Authorization: Bearer {key}")]
}

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// The schemathesis command line against `serve` as `key`, writing its reports under `reports`.
fn schemathesis_command(serve: &Serve, key: &str, reports: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(schemathesis_bin());
    command
        .arg("--config-file")
        .arg(manifest_dir().join("tests/api_fuzz.toml"))
        .arg("--no-color")
        .arg("run")
        .arg(format!("http://{}/openapi.json", serve.addr))
        .args(["--seed", &setting("CAIRN_FUZZ_SEED", SEED)])
        .args([
            "--max-examples",
            &setting("CAIRN_FUZZ_MAX_EXAMPLES", MAX_EXAMPLES),
        ])
        // One worker: Hypothesis parses sources with `ast.parse`, which CPython 3.11 is not safe
        // to call from two threads at once (a spurious "AST constructor recursion depth
        // mismatch" SystemError, CPython gh-106905; seen here on 3.11.7 with two workers).
        .args(["--workers", "1"])
        // No example database: each run starts from the seed alone.
        .args(["--generation-database", "none"])
        // Findings show the real requests (the key is a throwaway of this test's database).
        .args(["--output-sanitize", "false"])
        .args(["--report", "junit", "--report-dir"])
        .arg(reports)
        // Whatever schemathesis or Hypothesis write beside their reports stays out of the tree.
        .current_dir(reports)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for header in request_headers(key) {
        command.args(["--header", &header]);
    }
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs schemathesis (scripts/install-schemathesis.sh); scripts/test.sh runs it"]
async fn schemathesis_with_every_check_finds_nothing() {
    // Before the server starts: a missing fuzzer fails at once.
    schemathesis_bin();
    let db = common::TestSqlite::create();
    let key = serve_process::create_key(&db.path, "read,submit,admin", "api-fuzz").await;
    // Every model and tool of the built-in simulator priced, so a schema-valid money cap
    // (`budget.cost`) is one the server can honour, not a 422.
    let prices = db.path.with_extension("prices.toml");
    std::fs::write(
        &prices,
        "[prices.models.cairn-sim]\ninput_per_million = 0.1\noutput_per_million = 0.4\n\
         [prices.tools]\nlookup = 0.001\nwrite_note = 0.002\n",
    )
    .expect("price table");
    let serve = Serve::start(
        Db::Sqlite(&db.path),
        &[
            ("CAIRN_CONFIG", prices.to_str().expect("utf-8 path")),
            // The real engines on the built-in simulator, not the scripted lifecycle engine.
            ("CAIRN_TEST_MINIMAL_ENGINE", "false"),
            ("CAIRN_WORKERS", "2"),
            ("RUST_LOG", "error"),
        ],
    )
    .await;
    let reports = manifest_dir().join("target/tmp/api_fuzz");
    std::fs::create_dir_all(&reports).expect("report dir");

    let started = Instant::now();
    let child = schemathesis_command(&serve, &key, &reports)
        .spawn()
        .expect("start schemathesis");
    let output = tokio::time::timeout(WALL_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ran longer than {WALL_LIMIT:?}"))
        .expect("schemathesis output");
    let elapsed = started.elapsed();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(reports.join("report.txt"), &report).expect("write report");
    eprintln!(
        "schemathesis took {elapsed:.1?}; report in {}",
        reports.display()
    );

    assert!(
        output.status.success(),
        "schemathesis found problems (exit {:?}); its report:\n{report}",
        output.status.code()
    );
    // A run that tested nothing must not pass: every case passed, every operation was tested.
    let cases = report
        .lines()
        .find(|line| line.contains(" generated, "))
        .unwrap_or_else(|| panic!("no `N generated` line; its report:\n{report}"));
    let counts: Vec<&str> = cases.split_whitespace().collect();
    // Cases schemathesis could not send as generated (`, M skipped`) are not findings.
    assert!(
        matches!(counts.as_slice(),
            [generated, "generated,", passed, "passed"]
            | [generated, "generated,", passed, "passed,", _, "skipped"]
            if generated == passed && *generated != "0"),
        "expected `N generated, N passed`, got {cases:?}; its report:\n{report}"
    );
    let document: serde_json::Value =
        serde_json::from_str(&cairn::http::openapi_json()).expect("document");
    let operations: usize = document["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|item| item.as_object().map_or(0, |methods| methods.len()))
        .sum();
    // `GET /openapi.json` is the schema itself, which schemathesis leaves out.
    let tested = format!("Tested: {}", operations - 1);
    assert!(
        report.contains(&tested),
        "expected `{tested}` (every operation but the document itself); its report:\n{report}"
    );
}

/// The `pattern` the OpenAPI document gives `CreateTaskRequest.goal`.
fn documented_goal_schema() -> serde_json::Value {
    let document: serde_json::Value =
        serde_json::from_str(&cairn::http::openapi_json()).expect("document");
    let goal = &document["components"]["schemas"]["CreateTaskRequest"]["properties"]["goal"];
    assert!(goal["pattern"].is_string(), "goal has no pattern: {goal}");
    goal.clone()
}

fn server_accepts(goal: &str) -> bool {
    CreateTaskRequest {
        tools: None,
        approval: None,
        goal: goal.to_string(),
        budget: Some(BudgetRequest::from(Budget {
            tokens: 1,
            tool_calls: 1,
            wall_ms: 1,
            cost: None,
        })),
        strategy: None,
        metadata: None,
    }
    .validate()
    .is_ok()
}

/// Characters on both sides of every rule: NUL and other controls, ASCII and Unicode
/// whitespace, the invisible ones, and visible ones of one to four UTF-8 bytes.
fn goal_char() -> impl Strategy<Value = char> {
    prop::sample::select(vec![
        '\0',
        '\u{1}',
        '\t',
        '\n',
        '\r',
        ' ',
        '\u{7F}',
        '\u{85}',
        '\u{9F}',
        '\u{A0}',
        '\u{AD}',
        '\u{1680}',
        '\u{180E}',
        '\u{2000}',
        '\u{200A}',
        '\u{200B}',
        '\u{200C}',
        '\u{200D}',
        '\u{2028}',
        '\u{2029}',
        '\u{202F}',
        '\u{205F}',
        '\u{2060}',
        '\u{3000}',
        '\u{FEFF}',
        'a',
        'Z',
        '0',
        '.',
        'é',
        'ß',
        '中',
        '😀',
        '\u{1D400}',
    ])
}

/// The documented goal schema, compiled once for the property test.
static GOAL_VALIDATOR: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    jsonschema::validator_for(&documented_goal_schema()).expect("goal schema compiles")
});

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The documented goal schema (pattern, lengths) accepts exactly the goals the server does.
    #[test]
    fn the_documented_goal_rule_is_the_servers(chars in prop::collection::vec(goal_char(), 0..12)) {
        let goal: String = chars.into_iter().collect();
        let documented = GOAL_VALIDATOR.is_valid(&serde_json::json!(goal));
        prop_assert_eq!(documented, server_accepts(&goal), "goal {:?}", goal);
    }
}

#[test]
fn the_documented_goal_length_is_the_servers() {
    let schema = documented_goal_schema();
    let validator = jsonschema::validator_for(&schema).expect("goal schema compiles");
    let max = cairn::http::tasks::MAX_GOAL_CHARS;
    assert_eq!(schema["maxLength"], serde_json::json!(max));
    for goal in [
        "x".repeat(max),
        "x".repeat(max + 1),
        "😀".repeat(max),
        "😀".repeat(max + 1),
    ] {
        let documented = validator.is_valid(&serde_json::json!(goal));
        assert_eq!(
            documented,
            server_accepts(&goal),
            "{} chars",
            goal.chars().count()
        );
    }
}
