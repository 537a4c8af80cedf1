//! `cairn eval` on the fair suite with the competent world profile (a model that never slips):
//! the engine's own mechanisms (planning, carrying a value from one step to the next, checks,
//! repairs after a fault) must then verify every task that needs tools, for every strategy that
//! calls them, while one_shot, which calls no tool, verifies only the tasks a model knows alone.
//! A regression in any of those mechanisms shows here as a task that no longer verifies.
// Test code: a failed set-up is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;

use cairn_eval::report::Record;
use cairn_eval::runner::{EvalParams, parse_strategies};
use cairn_eval::suite::{Profile, Suite, fact_refs};

const SUITE: &str = "suites/reachable";

fn competent(out: &Path) -> EvalParams {
    EvalParams {
        suite: SUITE.into(),
        strategies: parse_strategies("one_shot,reactive,v1,v2,auto").expect("strategies"),
        repeat: 1,
        out: out.to_path_buf(),
        database_url: None,
        workers: 4,
        progress: false,
        live: None,
        overrides: Vec::new(),
        profile: Profile::Competent,
        resume: false,
        max_runs: None,
        tasks: None,
    }
}

fn unverified(records: &[Record], strategy: &str) -> BTreeSet<String> {
    records
        .iter()
        .filter(|r| r.strategy == strategy && !r.verified)
        .map(|r| r.task.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_competent_model_verifies_the_fair_suite_with_every_tool_calling_strategy() {
    let suite = Suite::load(Path::new(SUITE)).expect("the reachable suite loads");
    let dir = tempfile::tempdir().expect("tempdir");
    let report = cairn_eval::compose::evaluate(&competent(dir.path()))
        .await
        .expect("the evaluation runs");
    assert_eq!(report.profile, Profile::Competent);
    assert_eq!(report.records.len(), suite.tasks.len() * 5);

    for strategy in ["reactive", "v1", "v2", "auto"] {
        let lost = unverified(&report.records, strategy);
        assert!(
            lost.is_empty(),
            "{strategy} lost {lost:?} on a competent model"
        );
    }
    // What needs no tool, one_shot answers; everything else it must not claim as verified.
    let knowledge: BTreeSet<String> = suite
        .tasks
        .iter()
        .filter(|t| t.steps.is_empty())
        .map(|t| t.id.clone())
        .collect();
    assert!(
        !knowledge.is_empty(),
        "the suite keeps tasks a model knows alone"
    );
    let one_shot_lost = unverified(&report.records, "one_shot");
    let all: BTreeSet<String> = suite.tasks.iter().map(|t| t.id.clone()).collect();
    let tool_tasks: BTreeSet<String> = all.difference(&knowledge).cloned().collect();
    assert_eq!(
        one_shot_lost, tool_tasks,
        "one_shot verifies what needs no tool"
    );

    // The tasks where a later step needs a value an earlier step returned.
    let carries: BTreeSet<String> = suite
        .tasks
        .iter()
        .filter(|t| {
            t.steps
                .iter()
                .flat_map(|s| s.args.values())
                .any(|v| !fact_refs(v).is_empty())
        })
        .map(|t| t.id.clone())
        .collect();
    assert!(
        !carries.is_empty(),
        "the suite keeps tasks that carry a value"
    );
    // Every injected fault fired and the planner recovered from it; every tool task was
    // planned and its checks passed, and each value a later step needed was carried to it.
    for record in report.records.iter().filter(|r| r.strategy == "v2") {
        if record.fault.is_some() {
            assert!(record.fault_fired, "{}: its fault never fired", record.task);
            assert_eq!(record.recovered, Some(true), "{}", record.task);
        }
        assert_eq!(record.repeated_side_effects, 0, "{}", record.task);
        if !knowledge.contains(&record.task) {
            assert_eq!(record.funnel.plan_accepted, Some(true), "{}", record.task);
            assert_eq!(record.funnel.checks_passed, Some(true), "{}", record.task);
        }
        if carries.contains(&record.task) {
            assert_eq!(record.funnel.value_carried, Some(true), "{}", record.task);
        }
    }
}
