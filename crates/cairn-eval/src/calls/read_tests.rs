//! The reader: plain and gzipped logs read alike, a run picked by task, strategy and repeat,
//! and a run that is not there named in plain words with the runs that are.

use std::io::Write as _;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::json;

use super::read::{CallsError, Query, load, read_log};
use super::{Answer, CALLS_FILE, StoredCall, show_run};
use cairn::domain::task::Strategy;
use cairn::engine::prompts;
use cairn::engine::runtime::ports::{Purpose, Turn};

fn stored(task: &str, strategy: Strategy, repeat: u32, seq: u64) -> StoredCall {
    StoredCall {
        task: task.into(),
        repeat,
        strategy: Some(strategy),
        task_id: uuid::Uuid::from_u128(u128::from(repeat) + 1),
        seq,
        purpose: Purpose::Tactical,
        milestone: Some("m1".into()),
        attempt: 1,
        sampling: "endpoint".into(),
        prompt_sha8: super::sha8(prompts::TACTICAL.text),
        prompt_version: Some(prompts::TACTICAL.version()),
        input: json!({
            "goal": format!("goal of {task}"),
            "milestone": {"id": "m1", "title": "Find the module"},
            "tools": [{"name": "search", "schema": {}}, {"name": "edit"}],
            "artifacts": {},
        }),
        turns: vec![Turn::model(json!({"tool": "search"}))],
        schema: Some(json!({"type": "object", "title": "the tactical schema"})),
        answer: Answer::Value(json!({"steps": [{"tool": "search", "args": {"q": "bug"}}]})),
        tokens: 100 + seq,
        latency_ms: 250,
        verdict: None,
    }
}

/// Three runs of `dep` (reactive 0 and 1, v2 0) and one of `other`.
fn log() -> Vec<StoredCall> {
    vec![
        stored("dep", Strategy::Reactive, 0, 1),
        stored("dep", Strategy::V2, 0, 1),
        stored("dep", Strategy::Reactive, 0, 2),
        stored("other", Strategy::V2, 0, 1),
        stored("dep", Strategy::Reactive, 1, 1),
    ]
}

fn text(calls: &[StoredCall]) -> String {
    calls
        .iter()
        .map(|c| serde_json::to_string(c).unwrap() + "\n")
        .collect()
}

fn write_plain(dir: &Path) -> std::path::PathBuf {
    let path = dir.join(CALLS_FILE);
    std::fs::write(&path, text(&log())).unwrap();
    path
}

fn write_gzipped(dir: &Path) -> std::path::PathBuf {
    let path = dir.join(format!("{CALLS_FILE}.gz"));
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(text(&log()).as_bytes()).unwrap();
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    path
}

fn query(task: &str, strategy: Option<Strategy>, repeat: Option<u32>) -> Query {
    Query {
        task: task.into(),
        strategy,
        repeat,
    }
}

#[test]
fn plain_and_gzipped_logs_read_alike() {
    let plain = tempfile::tempdir().unwrap();
    let gzipped = tempfile::tempdir().unwrap();
    assert_eq!(read_log(&write_plain(plain.path())).unwrap(), log());
    let path = write_gzipped(gzipped.path());
    assert_eq!(read_log(&path).unwrap(), log());
    // A folder holding only the gzipped log is read through it.
    let q = query("dep", Some(Strategy::V2), None);
    let (found, run) = load(gzipped.path(), &q).unwrap();
    assert_eq!(found, path);
    assert_eq!(run.calls.len(), 1);
}

#[test]
fn a_run_is_picked_by_task_strategy_and_repeat() {
    let dir = tempfile::tempdir().unwrap();
    write_plain(dir.path());
    let q = query("dep", Some(Strategy::Reactive), Some(0));
    let (_, run) = load(dir.path(), &q).unwrap();
    assert_eq!((run.strategy, run.repeat), (Some(Strategy::Reactive), 0));
    let seqs: Vec<u64> = run.calls.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, [1, 2]);
    let (_, run) = load(dir.path(), &query("dep", None, Some(1))).unwrap();
    assert_eq!(
        (run.strategy, run.calls.len()),
        (Some(Strategy::Reactive), 1)
    );
    let (_, run) = load(dir.path(), &query("other", None, None)).unwrap();
    assert_eq!(run.calls[0].task, "other");
}

#[test]
fn a_run_that_is_not_there_is_named_with_the_runs_that_are() {
    let dir = tempfile::tempdir().unwrap();
    write_plain(dir.path());
    let missing = load(dir.path(), &query("dep", Some(Strategy::V1), None)).unwrap_err();
    assert!(matches!(missing, CallsError::NoRun { .. }), "{missing:?}");
    let message = missing.to_string();
    assert!(
        message.contains("no run of task \"dep\" with strategy v1"),
        "{message}"
    );
    assert!(
        message.contains("strategy reactive, repeat 0 (2 calls)")
            && message.contains("strategy reactive, repeat 1 (1 calls)")
            && message.contains("strategy v2, repeat 0 (1 calls)"),
        "{message}"
    );
    let several = load(dir.path(), &query("dep", None, Some(0))).unwrap_err();
    assert!(
        matches!(several, CallsError::Ambiguous { count: 2, .. }),
        "{several:?}"
    );
    assert!(several.to_string().contains("--strategy"), "{several}");
    let unknown = load(dir.path(), &query("nope", None, None)).unwrap_err();
    assert!(
        unknown.to_string().contains("the tasks dep, other"),
        "{unknown}"
    );
    let empty = tempfile::tempdir().unwrap();
    let none = load(empty.path(), &query("dep", None, None)).unwrap_err();
    assert!(matches!(none, CallsError::NoLog(_)), "{none:?}");
}

#[test]
fn a_cut_last_line_is_left_out_and_a_broken_one_before_it_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(CALLS_FILE);
    std::fs::write(&path, text(&log()) + "{\"task\": \"dep\", \"rep").unwrap();
    assert_eq!(read_log(&path).unwrap().len(), 5);
    std::fs::write(&path, "{\"task\": \"dep\"}\n".to_string() + &text(&log())).unwrap();
    let broken = read_log(&path).unwrap_err();
    assert!(
        matches!(broken, CallsError::Line { line: 1, .. }),
        "{broken:?}"
    );
}

#[test]
fn a_run_is_shown_call_by_call_and_in_full_with_its_prompt() {
    let dir = tempfile::tempdir().unwrap();
    write_plain(dir.path());
    let q = query("dep", Some(Strategy::Reactive), Some(0));
    let brief = show_run(dir.path(), &q, false).unwrap();
    assert!(
        brief.starts_with("task dep, strategy reactive, repeat 0: 2 calls"),
        "{brief}"
    );
    let version = prompts::TACTICAL.version();
    assert!(
        brief.contains(&format!(
            "#2 tactical, milestone m1, attempt 1 | {version} | 102 tokens | 250 ms | verdict: -"
        )),
        "{brief}"
    );
    assert!(brief.contains("goal: goal of dep"), "{brief}");
    assert!(brief.contains("milestone: m1: Find the module"), "{brief}");
    assert!(brief.contains("tools offered: search, edit"), "{brief}");
    assert!(brief.contains("input also: artifacts"), "{brief}");
    assert!(brief.contains("model: {\"tool\":\"search\"}"), "{brief}");
    assert!(
        brief.contains("\"q\": \"bug\""),
        "the answer, pretty: {brief}"
    );
    assert!(!brief.contains("the tactical schema"), "{brief}");
    let full = show_run(dir.path(), &q, true).unwrap();
    let first_line = prompts::TACTICAL
        .text
        .lines()
        .find(|l| l.len() > 20)
        .unwrap();
    assert!(full.contains(first_line), "the prompt text: {full}");
    assert!(full.contains("the tactical schema"), "{full}");
    assert!(full.contains("\"title\": \"Find the module\""), "{full}");
}

#[test]
fn a_run_run_again_after_a_resume_is_shown_per_cairn_task() {
    let dir = tempfile::tempdir().unwrap();
    let mut again = stored("dep", Strategy::V2, 0, 1);
    again.task_id = uuid::Uuid::from_u128(99);
    let calls = [stored("dep", Strategy::V2, 0, 1), again];
    std::fs::write(dir.path().join(CALLS_FILE), text(&calls)).unwrap();
    let shown = show_run(dir.path(), &query("dep", None, None), false).unwrap();
    assert!(shown.contains("2 calls in 2 cairn tasks"), "{shown}");
    assert_eq!(shown.matches("== cairn task").count(), 2, "{shown}");
    let missing = load(&dir.path().join("nowhere"), &query("dep", None, None)).unwrap_err();
    assert!(
        missing.to_string().ends_with("nowhere does not exist"),
        "{missing}"
    );
}
