//! The v2 rollout: the sticky split of `auto` tasks, the refusal to raise it while the latest
//! evaluation shows a regression (also over HTTP, and against the committed default report),
//! `GET /v1/stats` showing the split, and `auto` tasks really running on the arm they drew.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_fakes;

use std::sync::Arc;

use cairn::clock::SystemClock;
use cairn::config::Config;
use cairn::domain::settings::EngineSettings;
use cairn::domain::task::{Strategy, TaskStatus};
use cairn::engine::baselines::BaselineConfig;
use cairn::engine::dispatch::{Dispatch, Engines};
use cairn::engine::rollout::{Arm, Rollout, RolloutError};
use cairn::store::Store;
use cairn::store::sqlite::SqliteStore;
use engine_fakes::*;
use serde_json::{Value, json};

fn report_with(regressions: &[&str]) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    let body = json!({"suite": "t", "v2_regressions": regressions});
    std::fs::write(file.path(), body.to_string()).expect("write report");
    file
}

#[test]
fn the_split_follows_the_percentage_and_is_sticky_by_task_id() {
    let rollout = Rollout::new(30, None);
    let ids: Vec<uuid::Uuid> = (0..4000).map(|_| uuid::Uuid::now_v7()).collect();
    let on_v2: Vec<&uuid::Uuid> = ids
        .iter()
        .filter(|id| rollout.arm(**id) == Arm::V2)
        .collect();
    let share = on_v2.len() as f64 / ids.len() as f64;
    assert!((0.26..=0.34).contains(&share), "share on v2: {share}");
    // Sticky: the same id always draws the same arm.
    for id in ids.iter().take(200) {
        assert_eq!(rollout.arm(*id), rollout.arm(*id));
        assert_eq!(Rollout::bucket(*id), Rollout::bucket(*id));
    }
    // Lowering is always allowed; raising again puts every earlier v2 task back on v2.
    rollout.set(10).expect("lowering");
    assert_eq!(rollout.percent(), 10);
    let file = report_with(&[]);
    let rollout = Rollout::new(30, Some(file.path().to_path_buf()));
    rollout.set(60).expect("raising with a clean report");
    for id in &on_v2 {
        assert_eq!(rollout.arm(**id), Arm::V2);
    }
    assert_eq!(rollout.set(101), Err(RolloutError::OutOfRange(101)));
}

#[test]
fn raising_is_refused_while_the_latest_evaluation_shows_a_regression() {
    let file = report_with(&["uncertain-timeout-query"]);
    let rollout = Rollout::new(20, Some(file.path().to_path_buf()));
    assert_eq!(
        rollout.set(50),
        Err(RolloutError::Regression {
            tasks: vec!["uncertain-timeout-query".into()]
        })
    );
    assert_eq!(rollout.percent(), 20);
    rollout.set(20).expect("unchanged is not a raise");
    rollout.set(5).expect("rolling back is never blocked");
    // A fixed report unblocks it.
    std::fs::write(file.path(), json!({"v2_regressions": []}).to_string()).expect("write");
    rollout.set(50).expect("clean report");
    assert_eq!(rollout.percent(), 50);
    // No evidence is not a clean bill.
    let blind = Rollout::new(0, None);
    assert!(matches!(blind.set(10), Err(RolloutError::NoEvaluation(_))));
    let missing = Rollout::new(0, Some("/nonexistent/report.json".into()));
    assert!(matches!(
        missing.set(10),
        Err(RolloutError::NoEvaluation(_))
    ));
}

#[test]
fn the_committed_default_report_decides_a_raise_by_its_rollout_regressions() {
    // The gate reads the committed evaluation: a raise passes only when no task v1 solves is
    // left unsolved by `auto`. Since rule 10 (docs/evaluation.md, "Plans, read from the
    // store") the default report lists one (`simple-lookup-owner`), so a raise is refused
    // until the report is clean again; rolling back is never blocked.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/suites/default/report/report.json"
    );
    let regressions =
        cairn::engine::rollout::v2_regressions(std::path::Path::new(path)).expect("report");
    let rollout = Rollout::new(10, Some(path.into()));
    match rollout.set(20) {
        Ok(_) => assert!(regressions.is_empty(), "raised past {regressions:?}"),
        Err(RolloutError::Regression { tasks }) => {
            assert!(!regressions.is_empty());
            assert_eq!(tasks, regressions);
        }
        Err(other) => panic!("the committed report was not read: {other:?}"),
    }
    rollout.set(5).expect("rolling back is never blocked");
}

#[tokio::test]
async fn the_api_refuses_a_raise_with_409_and_stats_show_the_split() {
    let file = common::TestSqlite::create();
    let store = SqliteStore::open(&file.path).await.expect("open");
    store.migrate().await.expect("migrate");
    let report = report_with(&["medium-x"]);
    let rollout = Arc::new(Rollout::new(25, Some(report.path().to_path_buf())));
    let state =
        cairn::http::AppState::new(Arc::new(store), Arc::new(SystemClock), Config::default())
            .with_rollout(rollout.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(cairn::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();

    let refused = http
        .put(format!("{base}/v1/rollout"))
        .json(&json!({"percent": 80}))
        .send()
        .await
        .expect("put");
    assert_eq!(refused.status(), 409);
    let problem: Value = refused.json().await.expect("problem");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or("")
            .contains("medium-x"),
        "{problem}"
    );
    assert_eq!(rollout.percent(), 25);

    let lowered = http
        .put(format!("{base}/v1/rollout"))
        .json(&json!({"percent": 5}))
        .send()
        .await
        .expect("put");
    assert_eq!(lowered.status(), 200);
    let split: Value = lowered.json().await.expect("split");
    assert_eq!(split["percent"], 5);

    let invalid = http
        .put(format!("{base}/v1/rollout"))
        .json(&json!({"percent": 150}))
        .send()
        .await
        .expect("put");
    assert_eq!(invalid.status(), 422);

    let stats: Value = http
        .get(format!("{base}/v1/stats"))
        .send()
        .await
        .expect("stats")
        .json()
        .await
        .expect("json");
    assert_eq!(stats["rollout"]["percent"], 5);
    let got: Value = http
        .get(format!("{base}/v1/rollout"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(got["percent"], 5);
    let _ = stop.send(());
    let _ = server.await;
}

#[tokio::test]
async fn auto_tasks_run_on_the_arm_they_drew() {
    let file = common::TestSqlite::create();
    let store = SqliteStore::open(&file.path).await.expect("open");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    let goal = "Rename config key db.url to db.dsn in services A, B, C";
    for (percent, engine_name) in [(0u8, "v1"), (100, "v2")] {
        let model = Arc::new(FakeModel::default());
        let tools = Arc::new(FakeTools::default());
        script_worked_example(&model);
        model.reply(
            "strategic",
            "v1",
            0,
            json!({"steps": [{"tool": "search", "args": {"query": "db.url"}}]}),
            1_000,
        );
        let rollout = Arc::new(Rollout::new(percent, None));
        let engines = || {
            Engines::new(
                model.clone(),
                tools.clone(),
                EngineSettings::default(),
                BaselineConfig::default(),
            )
        };
        let engine = Dispatch::new(engines(), engines(), rollout.clone());
        let task = run_task(
            store.clone(),
            &engine,
            goal,
            Strategy::Auto,
            budget(200_000),
        )
        .await;
        assert_eq!(task.status, TaskStatus::Succeeded);
        assert_eq!(task.result.expect("result")["engine"], engine_name);
        let split = rollout.split();
        let (v2_count, v1_count) = if percent == 0 { (0, 1) } else { (1, 0) };
        assert_eq!((split.routed_v2, split.routed_v1), (v2_count, v1_count));
    }
}
