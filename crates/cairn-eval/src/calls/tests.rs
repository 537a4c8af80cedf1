//! The writer: a live call is stored whole, with the run it belongs to and the world's verdict
//! (the same one `trace.jsonl` gets), and a resumed log keeps what it held.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::read::read_log;
use super::{Answer, CALLS_FILE, StoredCall, sha8};
use crate::suite::Suite;
use crate::trace::Tracing;
use crate::world::{Judged, META_KEY, Verdict, World};
use cairn::domain::task::{Budget, DEFAULT_TENANT, NewTask, Strategy};
use cairn::engine::prompts;
use cairn::engine::runtime::ports::{
    FailureKind, ModelCall, ModelPort, ModelReply, PortError, Purpose, Sampling, Turn,
};
use cairn::store::Store;
use cairn::store::sqlite::SqliteStore;

const SUITE: &str = r#"
name = "one"
[world]
seed = 3
[[tasks]]
id = "dep"
category = "medium"
goal = "find the module and patch it"
steps = [
  { id = "find", tool = "search", args = { q = "bug" }, reveals = { module = "src/hidden_module.rs" } },
  { id = "patch", tool = "edit", args = { path = "{module}" }, writes = true },
]
"#;

/// The model: the right first step, or (when the input says `fail`) no JSON at all.
struct Fake;

#[async_trait]
impl ModelPort for Fake {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        if call.input.get("fail").is_some() {
            return Err(PortError {
                kind: FailureKind::InvalidOutput,
                message: "not JSON: sure, I will search".into(),
                tokens: 7,
                split: Default::default(),
                estimated: false,
            });
        }
        Ok(ModelReply {
            value: json!({"tool": "search", "args": {"q": "bug"}}),
            tokens: 42,
            ..ModelReply::default()
        })
    }
}

/// A world over the one-task suite, with one stored task: repeat 1 of `dep`, reactive.
async fn world(dir: &Path) -> (Arc<World>, uuid::Uuid) {
    let store = SqliteStore::open(&dir.join("eval.db")).await.unwrap();
    store.migrate().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let suite: Suite = toml::from_str(SUITE).unwrap();
    suite.check().unwrap();
    let id = uuid::Uuid::now_v7();
    let new = NewTask {
        id,
        tenant_id: DEFAULT_TENANT.into(),
        goal: "find the module and patch it".into(),
        strategy: Strategy::Reactive,
        budget: Budget {
            tokens: 1000,
            tool_calls: 10,
            wall_ms: 1000,
            cost: None,
        },
        metadata: json!({META_KEY: {"task": "dep", "repeat": 1}}),
        tools: None,
        approval: Default::default(),
    };
    store
        .create_task(new, None, chrono::DateTime::<chrono::Utc>::UNIX_EPOCH)
        .await
        .unwrap();
    (Arc::new(World::new(Arc::new(suite), store)), id)
}

fn ask(id: uuid::Uuid, input: Value) -> ModelCall {
    ModelCall {
        purpose: Purpose::Tactical,
        task_id: id,
        milestone: Some("reactive".into()),
        attempt: 2,
        prompt: prompts::REACTIVE.text.to_string(),
        input,
        turns: vec![
            Turn::model(json!({"tool": "search", "args": {"q": "bugs"}})),
            Turn::engine(json!({"error": "not found: nothing matches {\"q\":\"bugs\"}"})),
        ],
        schema: Some(json!({"type": "object"})),
        sampling: Sampling::Explore,
        max_tokens: 1024,
        retry_max_tokens: 2048,
    }
}

fn goal() -> Value {
    json!({"goal": "find the module and patch it", "tools": [{"name": "search"}, {"name": "edit"}]})
}

fn lines(dir: &Path) -> Vec<StoredCall> {
    read_log(&dir.join(CALLS_FILE)).unwrap()
}

fn traced(dir: &Path, world: &Arc<World>, resume: bool) -> Tracing {
    Tracing::new(Arc::new(Fake), world.clone())
        .logged(dir, resume)
        .unwrap()
}

#[tokio::test]
async fn a_live_call_is_stored_whole_with_its_run_and_the_worlds_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let (world, id) = world(dir.path()).await;
    let tracing = traced(dir.path(), &world, false);
    let call = ask(id, goal());
    let reply = tracing.complete(call.clone()).await.unwrap();
    assert_eq!(reply.tokens, 42);
    let mut failing = ask(id, json!({"goal": "g", "fail": true}));
    failing.attempt = 3;
    assert!(tracing.complete(failing).await.is_err());

    let stored = lines(dir.path());
    assert_eq!(stored.len(), 2);
    let first = &stored[0];
    assert_eq!(
        (first.task.as_str(), first.repeat, first.strategy),
        ("dep", 1, Some(Strategy::Reactive))
    );
    assert_eq!((first.task_id, first.seq), (id, 1));
    assert_eq!(first.purpose, Purpose::Tactical);
    assert_eq!(first.milestone.as_deref(), Some("reactive"));
    assert_eq!((first.attempt, first.sampling.as_str()), (2, "explore"));
    assert_eq!(first.prompt_version, Some(prompts::REACTIVE.version()));
    assert_eq!(first.version(), prompts::REACTIVE.version());
    assert_eq!(first.prompt_sha8, sha8(prompts::REACTIVE.text));
    assert_eq!((&first.input, &first.turns), (&call.input, &call.turns));
    assert_eq!(first.schema, call.schema);
    assert_eq!(
        first.answer,
        Answer::Value(json!({"tool": "search", "args": {"q": "bug"}}))
    );
    assert_eq!(first.tokens, 42);
    // The verdict is the one the trace got.
    let verdict = first.verdict.as_ref().expect("judged");
    assert_eq!((verdict.first, verdict.pending), (Verdict::Next, 2));
    let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
    let in_trace: Judged = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!(&in_trace, verdict);
    assert_eq!(trace.lines().count(), 1, "a failed call is not judged");

    let second = &stored[1];
    assert_eq!((second.seq, second.attempt, second.tokens), (2, 3, 7));
    assert_eq!(
        second.answer,
        Answer::Error {
            kind: FailureKind::InvalidOutput,
            message: "not JSON: sure, I will search".into()
        }
    );
    assert!(second.verdict.is_none());
    // The prompt text once, under its hash.
    let prompt = dir
        .path()
        .join("prompts")
        .join(format!("{}.md", first.prompt_sha8));
    assert_eq!(
        std::fs::read_to_string(prompt).unwrap(),
        prompts::REACTIVE.text
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("prompts"))
            .unwrap()
            .count(),
        1
    );
}

#[tokio::test]
async fn a_resumed_log_keeps_its_lines_and_numbers_on_and_a_fresh_one_starts_anew() {
    let dir = tempfile::tempdir().unwrap();
    let (world, id) = world(dir.path()).await;
    let tracing = traced(dir.path(), &world, false);
    tracing.complete(ask(id, goal())).await.unwrap();
    tracing.complete(ask(id, goal())).await.unwrap();
    drop(tracing);
    // A process killed as it wrote leaves a line without its end: cut off on resume, so the
    // next line starts on its own.
    let path = dir.path().join(CALLS_FILE);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"task\": \"dep\", \"rep");
    std::fs::write(&path, text).unwrap();

    let tracing = traced(dir.path(), &world, true);
    tracing.complete(ask(id, goal())).await.unwrap();
    drop(tracing);
    let stored = lines(dir.path());
    let seqs: Vec<u64> = stored.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert!(std::fs::read_to_string(&path).unwrap().ends_with("}\n"));

    let tracing = traced(dir.path(), &world, false);
    tracing.complete(ask(id, goal())).await.unwrap();
    let stored = lines(dir.path());
    assert_eq!(stored.len(), 1, "without --resume the log starts anew");
    assert_eq!(stored[0].seq, 1);
}
