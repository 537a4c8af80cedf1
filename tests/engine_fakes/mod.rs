//! Scripted model and tool ports for the engine tests, and a driver that runs one task through
//! the v2 engine on a real store (claim, run, re-claim after a yield) without the worker pool.
//!
//! The fakes are deliberately small: replies keyed by (purpose, milestone, attempt) with a
//! fallback per (purpose, milestone), and three tools with the worked example's state rule
//! (`run` in `c` fails until `c/start.sh` was edited). Every call is logged so tests can assert
//! what the engine asked, in which order, and how many distinct idempotency identities each
//! tool saw.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn::clock::SystemClock;
use cairn::domain::task::{Budget, NewTask, Strategy, Task, TaskStatus};
use cairn::engine::runtime::ports::{
    FailureKind, ModelCall, ModelPort, ModelReply, PortError, Purpose, ToolCall, ToolPort,
    ToolReply, ToolSpec,
};
use cairn::engine::{Engine, RunContext, RunOutcome, StopSignal};
use cairn::store::ClaimParams;
use cairn::store::Store;
use serde_json::{Value, json};

/// One logged model call.
#[derive(Debug, Clone)]
pub struct Asked {
    pub purpose: Purpose,
    pub milestone: Option<String>,
    pub attempt: u32,
    pub input: Value,
    pub turns: Vec<cairn::engine::runtime::ports::Turn>,
    pub sampling: cairn::engine::runtime::ports::Sampling,
}

/// (purpose, milestone or "", attempt or 0 for any) -> (reply, tokens)
type Script = BTreeMap<(String, String, u32), (Value, u64)>;

#[derive(Default)]
pub struct FakeModel {
    replies: Mutex<Script>,
    pub log: Mutex<Vec<Asked>>,
}

impl FakeModel {
    pub fn reply(&self, purpose: &str, milestone: &str, attempt: u32, value: Value, tokens: u64) {
        self.replies
            .lock()
            .unwrap()
            .insert((purpose.into(), milestone.into(), attempt), (value, tokens));
    }

    pub fn calls(&self, purpose: Purpose, milestone: Option<&str>) -> Vec<Asked> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.purpose == purpose && a.milestone.as_deref() == milestone)
            .cloned()
            .collect()
    }
}

#[async_trait]
impl ModelPort for FakeModel {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        self.log.lock().unwrap().push(Asked {
            purpose: call.purpose,
            milestone: call.milestone.clone(),
            attempt: call.attempt,
            input: call.input.clone(),
            turns: call.turns.clone(),
            sampling: call.sampling,
        });
        let purpose = call.purpose.as_str().to_string();
        let milestone = call.milestone.clone().unwrap_or_default();
        let found = {
            let replies = self.replies.lock().unwrap();
            replies
                .get(&(purpose.clone(), milestone.clone(), call.attempt))
                .or_else(|| replies.get(&(purpose.clone(), milestone.clone(), 0)))
                .cloned()
        };
        // A little latency so parallel milestones visibly overlap.
        tokio::time::sleep(Duration::from_millis(20)).await;
        match found {
            Some((value, tokens)) => Ok(ModelReply {
                value,
                tokens,
                ..ModelReply::default()
            }),
            None => Err(PortError::new(
                FailureKind::Permanent,
                format!(
                    "no scripted reply for {purpose}/{milestone}/{}",
                    call.attempt
                ),
            )),
        }
    }
}

/// One logged tool call.
#[derive(Debug, Clone)]
pub struct Called {
    pub tool: String,
    pub key: String,
    pub args: Value,
}

#[derive(Default)]
pub struct FakeTools {
    pub log: Mutex<Vec<Called>>,
    edited: Mutex<BTreeSet<String>>,
    /// Tools that always answer with an error.
    pub broken: Mutex<BTreeSet<String>>,
    /// Tools that can no longer be reached at all (a permanent failure).
    pub gone: Mutex<BTreeSet<String>>,
}

impl FakeTools {
    pub fn calls(&self, tool: &str) -> Vec<Called> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.tool == tool)
            .cloned()
            .collect()
    }

    pub fn distinct_keys(&self, tool: &str) -> usize {
        self.calls(tool)
            .into_iter()
            .map(|c| c.key)
            .collect::<BTreeSet<_>>()
            .len()
    }
}

#[async_trait]
impl ToolPort for FakeTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "search".into(),
                description: "search the repository".into(),
                schema: json!({"type": "object", "required": ["query"],
                               "properties": {"query": {"type": "string"}}}),
                side_effects: false,
                artifacts: Vec::new(),
            },
            ToolSpec {
                name: "grep".into(),
                description: "grep the repository".into(),
                schema: json!({"type": "object", "required": ["query"],
                               "properties": {"query": {"type": "string"}}}),
                side_effects: false,
                artifacts: Vec::new(),
            },
            ToolSpec {
                name: "edit_file".into(),
                description: "replace text in a file".into(),
                schema: json!({"type": "object", "required": ["path"],
                               "properties": {"path": {"type": "string"}, "find": {"type": "string"},
                                              "replace": {"type": "string"}}}),
                side_effects: true,
                artifacts: Vec::new(),
            },
            ToolSpec {
                name: "run".into(),
                description: "run a command".into(),
                schema: json!({"type": "object", "required": ["cmd"],
                               "properties": {"cmd": {"type": "string"}, "cwd": {"type": "string"}}}),
                side_effects: true,
                artifacts: Vec::new(),
            },
        ]
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        // The key the real tool client would send for this call.
        let key = cairn::tools::idempotency_key(call.task_id, &call.tool, &call.args, &call.repeat);
        self.log.lock().unwrap().push(Called {
            tool: call.tool.clone(),
            key,
            args: call.args.clone(),
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        if self.gone.lock().unwrap().contains(&call.tool) {
            return Err(PortError::new(
                FailureKind::Permanent,
                format!("{}: HTTP 404", call.tool),
            ));
        }
        if self.broken.lock().unwrap().contains(&call.tool) {
            return Ok(ToolReply {
                error: Some(format!("{} is broken", call.tool)),
                ..ToolReply::default()
            });
        }
        match call.tool.as_str() {
            "search" | "grep" => Ok(ToolReply {
                from_receipt: false,
                output: json!({"files": ["a/config.py", "b/config.py", "c/config.py"]}),
                artifacts: BTreeMap::from([(
                    "usage_list".to_string(),
                    json!(["a/config.py", "b/config.py", "c/config.py"]),
                )]),
                error: None,
            }),
            "edit_file" => {
                let path = call.args["path"].as_str().unwrap_or_default().to_string();
                self.edited.lock().unwrap().insert(path.clone());
                Ok(ToolReply {
                    output: json!({"patched": path}),
                    ..ToolReply::default()
                })
            }
            "run" => {
                let cwd = call.args["cwd"].as_str().unwrap_or_default();
                let edited = self.edited.lock().unwrap();
                let ok = edited.contains(&format!("{cwd}/config.py"))
                    && (cwd != "c" || edited.contains("c/start.sh"));
                Ok(ToolReply {
                    output: json!({"exit_code": if ok { 0 } else { 1 },
                                   "stdout": if ok { "ok" } else { "FAIL: db.url still read" }}),
                    ..ToolReply::default()
                })
            }
            other => Err(PortError::new(
                FailureKind::Permanent,
                format!("unknown tool {other}"),
            )),
        }
    }
}

pub fn budget(tokens: u64) -> Budget {
    Budget {
        tokens,
        tool_calls: 100,
        wall_ms: 600_000,
        cost: None,
    }
}

/// Creates a task and runs it through `engine` until it is terminal (at most `max_claims`).
pub async fn run_task(
    store: Arc<dyn Store>,
    engine: &dyn Engine,
    goal: &str,
    strategy: Strategy,
    budget: Budget,
) -> Task {
    let now = chrono::Utc::now();
    let created = store
        .create_task(
            NewTask {
                tools: None,
                id: uuid::Uuid::now_v7(),
                tenant_id: "default".into(),
                goal: goal.into(),
                strategy,
                budget,
                metadata: json!({}),
                approval: Default::default(),
            },
            None,
            now,
        )
        .await
        .expect("create task");
    let id = created.task.id;
    for _ in 0..3 {
        let claimed = store
            .claim(ClaimParams::new(
                "test-worker",
                chrono::Utc::now(),
                chrono::Duration::seconds(60),
            ))
            .await
            .expect("claim")
            .expect("a queued task");
        assert_eq!(claimed.task.id, id);
        let (_tx, rx) = tokio::sync::watch::channel(StopSignal::Run);
        let ctx = RunContext {
            task: claimed.task,
            lease: claimed.lease,
            state: claimed.state,
            store: store.clone(),
            clock: Arc::new(SystemClock),
            stop: rx,
            inbox: cairn::engine::Inbox::new(),
            meters: cairn::meters::Meters::new(),
        };
        let outcome = engine.run(ctx).await.expect("engine run");
        if let RunOutcome::Finished(_) = outcome {
            break;
        }
    }
    let task = store
        .get_task("default", id)
        .await
        .expect("get")
        .expect("task exists");
    assert!(task.status.is_terminal(), "task ended {:?}", task.status);
    task
}

/// Kinds of a task's events, in order.
pub async fn event_kinds(store: &Arc<dyn Store>, task: &Task) -> Vec<(i64, String, Value)> {
    store
        .list_events(cairn::domain::task::DEFAULT_TENANT, task.id, 0, 10_000)
        .await
        .expect("events")
        .into_iter()
        .map(|e| (e.seq, e.kind, e.data))
        .collect()
}

pub fn succeeded(task: &Task) -> bool {
    task.status == TaskStatus::Succeeded
}

/// The worked example's plan (docs/scenarios.md), as the strategic model answers it.
pub fn worked_plan() -> Value {
    let patch = |id: &str, dir: &str, title: &str| {
        json!({"id": id, "title": title, "depends_on": ["m1"], "effort": 2,
               "tools": ["edit_file", "run"],
               "accept": {"type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": dir}, "exit_code": 0}})
    };
    json!({"milestones": [
        {"id": "m1", "title": "Find every usage of db.url", "depends_on": [], "effort": 1,
         "tools": ["search"], "outcome": "list of files that read db.url",
         "accept": {"type": "artifact", "name": "usage_list", "non_empty": true}},
        patch("m2", "a", "Patch service A"),
        patch("m3", "b", "Patch service B"),
        patch("m4", "c", "Patch service C"),
    ]})
}

pub fn edit(id: &str, path: &str) -> Value {
    json!({"id": id, "tool": "edit_file",
           "args": {"path": path, "find": "db.url", "replace": "db.dsn"},
           "expected_output": "file patched"})
}

pub fn steps(list: Vec<Value>) -> Value {
    json!({ "steps": list })
}

/// Scripts the worked example: m1 9,000 tokens; m2, m3 44,500 each; m4 20,000 + an L1 retry
/// of 17,000 (both failing on c/start.sh) + an L2 replan of 15,000 that passes = 52,000.
pub fn script_worked_example(model: &FakeModel) {
    model.reply(
        "gate",
        "",
        0,
        json!({"est_tool_calls": 9, "touches_writes": true, "targets": 3, "goal_kind": "refactor"}),
        300,
    );
    model.reply("strategic", "", 0, worked_plan(), 1_200);
    model.reply(
        "tactical",
        "m1",
        0,
        steps(vec![
            json!({"id": "m1.s1", "tool": "search", "args": {"query": "db.url"}}),
        ]),
        9_000,
    );
    model.reply(
        "tactical",
        "m2",
        0,
        steps(vec![edit("m2.s1", "a/config.py")]),
        44_500,
    );
    model.reply(
        "tactical",
        "m3",
        0,
        steps(vec![edit("m3.s1", "b/config.py")]),
        44_500,
    );
    model.reply(
        "tactical",
        "m4",
        1,
        steps(vec![edit("m4.s1", "c/config.py")]),
        20_000,
    );
    model.reply(
        "tactical",
        "m4",
        2,
        steps(vec![json!({"id": "m4.s1", "tool": "edit_file",
            "args": {"path": "c/config.py", "find": "db.url", "replace": "db.dsn", "count": 2}})]),
        17_000,
    );
    model.reply(
        "tactical",
        "m4",
        3,
        steps(vec![
            edit("m4.s1", "c/config.py"),
            edit("m4.s2", "c/start.sh"),
        ]),
        15_000,
    );
    model.reply(
        "verifier",
        "",
        0,
        json!({"verdict": "pass", "reason": "all services read db.dsn"}),
        500,
    );
}
