//! `cairn eval` end to end: the real binary runs the small suite through all four strategies
//! (store, worker pool, HTTP API and simulated world in one process) and the report it writes
//! is checked: per-run records, verified success where the world says so, the gate's routes,
//! injected faults firing, regressions, and the three files.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::process::Command;

use serde_json::Value;

mod common;

fn run_eval(out: &std::path::Path) -> (String, Value) {
    run_suite("suites/small", &[], out)
}

/// `cairn eval` of `suite` through all five strategies, one repeat, with `extra` arguments.
fn run_suite(suite: &str, extra: &[&str], out: &std::path::Path) -> (String, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["eval", "--suite", suite])
        .args(["--strategies", "one_shot,reactive,v1,v2,auto"])
        .args(["--repeat", "1", "--workers", "4"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run cairn eval");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "cairn eval failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    (
        stdout,
        serde_json::from_str(&json).expect("report.json parses"),
    )
}

fn record<'a>(report: &'a Value, task: &str, strategy: &str) -> &'a Value {
    report["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|r| r["task"] == task && r["strategy"] == strategy)
        .unwrap_or_else(|| panic!("no record for {task}/{strategy}"))
}

#[test]
fn cairn_eval_runs_the_small_suite_and_reports_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (stdout, report) = run_eval(dir.path());

    // Progress lines while it runs, then the summary.
    assert!(stdout.matches("/25] ").count() == 25, "{stdout}");
    assert!(stdout.contains("## Per strategy"), "{stdout}");
    assert!(stdout.contains("## Regressions"), "{stdout}");

    assert_eq!(report["simulated"], true);
    assert_eq!(report["suite"], "small");
    let records = report["records"].as_array().expect("records");
    assert_eq!(records.len(), 5 * 5);
    for r in records {
        let status = r["status"].as_str().expect("status");
        assert!(
            ["succeeded", "failed", "budget_exhausted"].contains(&status),
            "{r}"
        );
        // Verified success implies the engine itself finished successfully.
        if r["verified"] == true {
            assert_eq!(status, "succeeded", "{r}");
        }
    }

    // A knowledge question: answered by every strategy. `auto`'s gate sends it direct:
    // neither its model nor its heuristic expects a tool call, so there is nothing to plan.
    // Forced v2 asks the planner, which writes no milestone: the plan is declined and the
    // direct route answers (`plan.declined`).
    for strategy in ["one_shot", "reactive", "v1", "v2", "auto"] {
        let r = record(&report, "simple-capital", strategy);
        assert_eq!(r["verified"], true, "{strategy}");
    }
    assert_eq!(record(&report, "simple-capital", "auto")["gate"], "direct");
    assert_eq!(record(&report, "simple-capital", "v2")["gate"], "plan");
    let one = record(&report, "simple-capital", "one_shot");
    assert_eq!(one["model_calls"], 1);
    assert_eq!(one["tool_calls"], 0);
    // one_shot cannot act: tasks that need a tool are never verified for it.
    for task in [
        "simple-lookup-version",
        "medium-data-pipeline",
        "uncertain-timeout-deploy",
    ] {
        assert_eq!(
            record(&report, task, "one_shot")["verified"],
            false,
            "{task}"
        );
    }
    // The gate (auto) with no direct history: a goal that writes is planned. A question about
    // a state ("which version is deployed?") reads as no action to the heuristic, so its route
    // follows the gate model's noisy estimate; either way it is answered with the lookup.
    assert_eq!(
        record(&report, "medium-data-pipeline", "auto")["gate"],
        "plan"
    );
    let lookup = record(&report, "simple-lookup-version", "auto");
    assert_eq!(lookup["verified"], true, "{lookup:#}");
    assert!(
        lookup["tool_calls"].as_u64().unwrap_or(0) >= 1,
        "{lookup:#}"
    );
    // Strategies that see observations before acting solve the dependent pipeline.
    for strategy in ["reactive", "v2", "auto"] {
        let r = record(&report, "medium-data-pipeline", strategy);
        assert_eq!(r["verified"], true, "{strategy}");
    }
    // The injected timeout fires for every strategy that calls the tool; those that retry
    // recover from it.
    for strategy in ["reactive", "v1", "v2"] {
        let r = record(&report, "uncertain-timeout-deploy", strategy);
        assert_eq!(r["fault"], "tool_timeout");
        assert_eq!(r["fault_fired"], true, "{strategy}");
    }
    for strategy in ["reactive", "v2"] {
        let r = record(&report, "uncertain-timeout-deploy", strategy);
        assert_eq!(r["recovered"], true, "{strategy}");
    }
    // The missing file is located by the adaptive strategies; v2 repairs it locally (at
    // least one repair, no side effect performed twice).
    let reactive = record(&report, "uncertain-missing-config", "reactive");
    assert_eq!(reactive["verified"], true);
    let repaired = record(&report, "uncertain-missing-config", "v2");
    assert_eq!(repaired["verified"], true);
    let repairs: u64 = repaired["repairs"]
        .as_object()
        .expect("repairs")
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum();
    assert!(repairs >= 1, "{repaired}");
    assert_eq!(repaired["repeated_side_effects"], 0);

    // Aggregates and regressions agree with the records.
    for strategy in ["one_shot", "reactive", "v1", "v2", "auto"] {
        let mine: Vec<&Value> = records
            .iter()
            .filter(|r| r["strategy"] == strategy)
            .collect();
        let verified = mine.iter().filter(|r| r["verified"] == true).count();
        let a = &report["aggregates"][strategy];
        assert_eq!(a["runs"], mine.len());
        assert_eq!(a["verified"], verified);
    }
    let regressions = report["regressions"].as_array().expect("regressions");
    assert!(
        regressions
            .iter()
            .any(|r| r["task"] == "medium-data-pipeline"
                && r["solved_by"] == "v2"
                && r["failed_by"] == "one_shot")
    );
    for r in regressions {
        let solved = record(
            &report,
            r["task"].as_str().unwrap(),
            r["solved_by"].as_str().unwrap(),
        );
        let failed = record(
            &report,
            r["task"].as_str().unwrap(),
            r["failed_by"].as_str().unwrap(),
        );
        assert_eq!(solved["verified"], true);
        assert_eq!(failed["verified"], false);
    }
    let v2_regressions = report["v2_regressions"].as_array().expect("v2_regressions");
    for task in v2_regressions {
        assert_eq!(
            record(&report, task.as_str().unwrap(), "v2")["verified"],
            false
        );
    }

    // The rollout gate's view: tasks v1 solved and the candidate (auto) did not.
    assert_eq!(report["rollout_candidate"], "auto");
    for task in report["rollout_regressions"]
        .as_array()
        .expect("rollout_regressions")
    {
        let task = task.as_str().unwrap();
        assert_eq!(record(&report, task, "v1")["verified"], true);
        assert_eq!(record(&report, task, "auto")["verified"], false);
    }

    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md");
    assert!(md.contains("| medium-data-pipeline | medium |"), "{md}");
    assert!(md.contains("simulated"));
    let svg = std::fs::read_to_string(dir.path().join("chart.svg")).expect("chart.svg");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("v2") && svg.contains("one_shot"));
}

/// The small suite, reactive and v2, one repeat, into `out`.
fn small_reactive_v2(
    out: &std::path::Path,
    database_url: Option<String>,
) -> cairn_eval::runner::EvalParams {
    cairn_eval::runner::EvalParams {
        suite: "suites/small".into(),
        strategies: cairn_eval::runner::parse_strategies("reactive,v2").expect("strategies"),
        repeat: 1,
        out: out.to_path_buf(),
        database_url,
        workers: 4,
        progress: false,
        live: None,
        overrides: Vec::new(),
        profile: cairn_eval::suite::Profile::Suite,
        resume: false,
        max_runs: None,
        tasks: None,
    }
}

#[tokio::test]
async fn cairn_eval_runs_on_postgres_too() {
    let pg = common::TestPg::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let params = small_reactive_v2(dir.path(), Some(pg.url.clone()));
    let report = cairn_eval::compose::evaluate(&params).await.expect("eval");
    assert_eq!(report.records.len(), 5 * 2);
    let pipeline = report
        .records
        .iter()
        .find(|r| r.task == "medium-data-pipeline" && r.strategy == "reactive")
        .expect("record");
    assert!(pipeline.verified);
    assert!(dir.path().join("report.json").exists());
    assert!(
        !dir.path().join("eval.db").exists(),
        "no SQLite file on Postgres"
    );
    pg.drop_database().await;
}

/// `report.json` without what may differ between two identical runs: wall-clock times.
fn without_wall_times(mut value: Value) -> Value {
    match &mut value {
        Value::Object(fields) => {
            fields.retain(|k, _| k != "wall_ms" && k != "mean_wall_ms");
            for v in fields.values_mut() {
                *v = without_wall_times(v.take());
            }
        }
        Value::Array(items) => {
            for v in items.iter_mut() {
                *v = without_wall_times(v.take());
            }
        }
        _ => {}
    }
    value
}

#[test]
fn the_same_suite_seed_and_binary_give_the_same_report() {
    // The default suite: parallel milestones, every fault class, the gate's noisy estimate.
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_, a) = run_suite("suites/default", &[], first.path());
    let (_, b) = run_suite("suites/default", &[], second.path());
    assert_eq!(without_wall_times(a), without_wall_times(b));
    for file in ["report.md", "chart.svg"] {
        let read = |dir: &tempfile::TempDir| std::fs::read(dir.path().join(file)).unwrap();
        assert!(read(&first) == read(&second), "{file} differs between runs");
    }
}

#[test]
fn a_sweep_runs_the_suite_per_value_and_charts_success_against_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "eval",
            "--suite",
            "suites/small",
            "--strategies",
            "v1,reactive",
        ])
        .args(["--sweep", "guess_success=0,1", "--workers", "4", "--out"])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let sweep: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("sweep.json")).unwrap())
            .unwrap();
    assert_eq!(sweep["param"], "guess_success");
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let tokens = |point: &Value, name: &str| {
        point["strategies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s[0] == name)
            .map(|s| s[3].as_f64().unwrap())
            .unwrap()
    };
    // v1 writes every argument before any result exists: with every guess wrong it needs
    // more lists (more tokens) to get the dependent pipeline right. Reactive sees results
    // first: guessing never matters to it.
    assert!(
        tokens(&points[0], "v1") > tokens(&points[1], "v1"),
        "{sweep}"
    );
    assert_eq!(
        tokens(&points[0], "reactive"),
        tokens(&points[1], "reactive")
    );
    for file in [
        "sweep.md",
        "sweep.svg",
        "guess_success-0/report.json",
        "guess_success-1/report.json",
    ] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "eval",
            "--suite",
            "suites/small",
            "--sweep",
            "guess_success=0.5,2",
        ])
        .arg("--out")
        .arg(dir.path().join("bad"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("within 0..=1"), "{stderr}");
}

/// Rule 10 through the whole stack: with every tool a step needs missed from the plan, v2
/// verifies less than without plan slips (a repair may be offered a missed reader); a check
/// naming an artifact no tool declares is amended, so that slip costs nothing.
#[test]
fn a_plan_missing_a_tool_fails_its_milestone_and_an_unbacked_check_is_amended() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = |param: &str| {
        let out = dir.path().join(param);
        let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["eval", "--suite", "suites/small", "--strategies", "v2"])
            .args([
                "--sweep",
                &format!("{param}=0,1"),
                "--workers",
                "4",
                "--out",
            ])
            .arg(&out)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let report = |value: &str| -> Value {
            let path = out.join(format!("{param}-{value}/report.json"));
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        };
        let verified_with_steps = |report: &Value| {
            report["records"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["verified"] == true && r["steps_performed"].as_u64() > Some(0))
                .count()
        };
        (
            verified_with_steps(&report("0")),
            verified_with_steps(&report("1")),
        )
    };
    // A plan that grants no milestone the tool it needs loses what a repair cannot reach: a
    // repair is offered the most relevant read-only tools beyond the grant, so a reader is
    // found again, a writer never.
    let (off, on) = sweep("plan_tool_miss");
    assert!(off > 0, "v2 verified no task with steps without plan slips");
    assert!(on < off, "plan_tool_miss = 1 lost nothing: {on} of {off}");
    // The engine stands behind its checks: the small suite's tools declare no artifacts, so a
    // check naming one no tool produces becomes `steps_succeeded` before the plan runs, and
    // the slip no longer fails the milestone (before the amendment, it verified none).
    let (off, on) = sweep("plan_accept_miss");
    assert!(off > 0, "v2 verified no task with steps without plan slips");
    assert_eq!(
        on, off,
        "plan_accept_miss = 1: an unbacked check changed what v2 verified"
    );
}

/// A new sitting, as a new process would see it: the recorded runs (`runs.*`) copied into a
/// fresh output directory. Three evaluations in one process on one SQLite path answered a 500
/// once in CI (the previous pool may still hold the file it deletes); the CLI runs one per
/// process.
fn next_sitting(from: &std::path::Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["runs.jsonl", "runs.meta.json"] {
        std::fs::copy(from.join(name), dir.path().join(name)).expect("copy the run log");
    }
    dir
}

#[tokio::test]
async fn a_resumed_evaluation_runs_only_what_is_owed_and_reports_on_all_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut params = small_reactive_v2(dir.path(), None);
    let first = cairn_eval::compose::evaluate(&params).await.expect("eval");
    assert_eq!(first.records.len(), 10);
    let lines = |dir: &tempfile::TempDir| {
        std::fs::read_to_string(dir.path().join("runs.jsonl"))
            .expect("log")
            .lines()
            .count()
    };
    assert_eq!(lines(&dir), 10, "every finished run is logged");

    // A second repeat in two sittings: the first runs 4 of the 10 owed and reports the matrix
    // as incomplete; the second runs the rest. The first repeat's runs are kept.
    let dir = next_sitting(dir.path());
    params.out = dir.path().to_path_buf();
    params.repeat = 2;
    params.resume = true;
    params.max_runs = Some(4);
    let partial = cairn_eval::compose::evaluate(&params)
        .await
        .expect("partial eval");
    assert_eq!((partial.records.len(), partial.planned_runs), (14, 20));
    assert!(partial.markdown().contains("14 of the matrix's 20 runs"));
    let dir = next_sitting(dir.path());
    params.out = dir.path().to_path_buf();
    params.max_runs = None;
    let resumed = cairn_eval::compose::evaluate(&params)
        .await
        .expect("resumed eval");
    assert_eq!(resumed.records.len(), 20);
    assert_eq!(lines(&dir), 20, "only the owed runs were run");
    let kept: Vec<_> = resumed.records.iter().filter(|r| r.repeat == 0).collect();
    assert_eq!(kept.len(), 10);
    for (before, after) in first.records.iter().zip(kept) {
        assert_eq!(
            serde_json::to_value(before).expect("json"),
            serde_json::to_value(after).expect("json")
        );
    }

    // Nothing owed: no run, the same report.
    let dir = next_sitting(dir.path());
    params.out = dir.path().to_path_buf();
    let again = cairn_eval::compose::evaluate(&params)
        .await
        .expect("nothing owed");
    assert_eq!(lines(&dir), 20);
    assert_eq!(again.aggregates, resumed.aggregates);

    // Another experiment (here another world) in the same directory is refused, and the
    // recorded runs are kept.
    let dir = next_sitting(dir.path());
    params.out = dir.path().to_path_buf();
    params.overrides = vec![("guess_success".parse().expect("param"), 0.1)];
    let refused = cairn_eval::compose::evaluate(&params)
        .await
        .expect_err("refused");
    assert!(
        refused.to_string().contains("another experiment"),
        "{refused}"
    );
    assert_eq!(lines(&dir), 20);
}

/// The funnel through the real path: every strategy on the small suite, in process. Each run's
/// stages apply where they should, the report's counts are its records', and a verified run
/// reached every stage that applied to it.
#[tokio::test]
async fn the_report_says_where_each_strategy_lost_its_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut params = small_reactive_v2(dir.path(), None);
    params.strategies =
        cairn_eval::runner::parse_strategies("one_shot,reactive,v1,v2,auto").expect("strategies");
    cairn_eval::compose::evaluate(&params).await.expect("eval");
    let json = std::fs::read_to_string(dir.path().join("report.json")).expect("report.json");
    let report: Value = serde_json::from_str(&json).expect("report.json parses");
    let records = report["records"].as_array().expect("records");
    let stages = [
        "plan_accepted",
        "tools_granted",
        "first_call_right",
        "value_carried",
        "checks_passed",
    ];
    for r in records {
        let f = &r["funnel"];
        let planned = ["v1", "v2", "auto"].contains(&r["strategy"].as_str().unwrap());
        if !planned || r["gate"] == "direct" {
            for stage in ["plan_accepted", "tools_granted", "checks_passed"] {
                assert!(f[stage].is_null(), "{stage}: {r:#}");
            }
        }
        if f["plan_accepted"] != true {
            assert!(
                f["tools_granted"].is_null() && f["checks_passed"].is_null(),
                "{r:#}"
            );
        }
        if r["verified"] == true {
            for stage in stages {
                assert_ne!(f[stage], false, "a verified run lost at {stage}: {r:#}");
            }
        }
        let y = &r["repair_yield"];
        assert!(y["repairs_different"].as_u64() <= y["repairs_proposed"].as_u64());
        assert!(y["repairs_then_passed"].as_u64() <= y["repairs_different"].as_u64());
    }
    // A knowledge question has no stage but the verdict; the dependent pipeline has them all
    // where a plan was accepted, and v2 gets through every one of them.
    let capital = record(&report, "simple-capital", "v2");
    for stage in stages {
        assert!(capital["funnel"][stage].is_null(), "{stage}: {capital:#}");
    }
    let pipeline = &record(&report, "medium-data-pipeline", "v2")["funnel"];
    for stage in stages {
        assert_eq!(pipeline[stage], true, "{stage}: {pipeline:#}");
    }
    let one_shot = &record(&report, "medium-data-pipeline", "one_shot")["funnel"];
    assert_eq!(
        one_shot["first_call_right"], false,
        "one_shot calls no tool"
    );
    assert!(one_shot["plan_accepted"].is_null());

    // The counts per strategy and per task are the records'.
    let funnel = &report["funnel"];
    let count = |runs: &[&Value], strategy: &str, counts: &Value| {
        assert_eq!(counts["runs"], runs.len(), "{strategy}");
        for stage in stages {
            let applicable = runs
                .iter()
                .filter(|r| !r["funnel"][stage].is_null())
                .count();
            let reached = runs.iter().filter(|r| r["funnel"][stage] == true).count();
            assert_eq!(
                counts[stage]["applicable"], applicable,
                "{strategy} {stage}"
            );
            assert_eq!(counts[stage]["reached"], reached, "{strategy} {stage}");
        }
        let verified = runs.iter().filter(|r| r["verified"] == true).count();
        assert_eq!(counts["verified"]["reached"], verified, "{strategy}");
        assert_eq!(counts["verified"]["applicable"], runs.len(), "{strategy}");
        for field in [
            "repairs_proposed",
            "repairs_different",
            "repairs_then_passed",
        ] {
            let sum: u64 = runs
                .iter()
                .map(|r| r["repair_yield"][field].as_u64().unwrap())
                .sum();
            assert_eq!(counts["repair_yield"][field], sum, "{strategy} {field}");
        }
    };
    for strategy in ["one_shot", "reactive", "v1", "v2", "auto"] {
        let mine: Vec<&Value> = records
            .iter()
            .filter(|r| r["strategy"] == strategy)
            .collect();
        count(&mine, strategy, &funnel["per_strategy"][strategy]);
        assert_eq!(
            funnel["per_strategy"][strategy]["verified"]["reached"],
            report["aggregates"][strategy]["verified"]
        );
        for r in &mine {
            let task = r["task"].as_str().unwrap();
            count(&[*r], strategy, &funnel["per_task"][task][strategy]);
        }
    }
    let applicable = |stage: &str| funnel["per_strategy"]["v2"][stage]["applicable"].as_u64();
    assert!(applicable("plan_accepted") > Some(0) && applicable("checks_passed") > Some(0));

    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md");
    assert!(md.contains("## Funnel (reached / applicable)"), "{md}");
    assert!(
        md.contains("| strategy | plan accepted | tools granted |"),
        "{md}"
    );
    assert!(md.contains("- v2: "), "{md}");
}
