//! Zero-latency, in-process model and tool ports for the orchestration benchmark.
//!
//! Why ports rather than the simulator: the simulator is an HTTP server, so every model and tool
//! call would pay a loopback round trip and JSON over a socket. The peer baselines
//! (`shared/bench/peers`) call in-process fakes, so to measure the same thing (orchestration
//! and persistence per step) cairn's model and tools answer in-process too, with no sleep.
//!
//! The model answers a fixed plan of one of two [`Shape`]s; the single tool `noop` returns one
//! artifact per step, which the milestone's `artifact` check then finds. An optional
//! [`Hold`] keeps every tool call waiting, which is how the memory phase pins tasks "active".

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use cairn::engine::runtime::ports::{
    FailureKind, ModelCall, ModelPort, ModelReply, PortError, Purpose, ToolCall, ToolPort,
    ToolReply, ToolSpec,
};
use serde_json::{Value, json};
use tokio::sync::watch;

/// Tokens each fake model call reports, so the ledger has something to charge.
const TOKENS_PER_CALL: u64 = 100;

/// How the N steps of a task are laid out in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One milestone; its tactical plan returns the N steps, run in order (the peers' shape:
    /// one plan of N steps, then N steps in order).
    OneMilestone,
    /// N milestones in a dependency chain, one step each: one tactical call per milestone.
    Milestones,
}

impl Shape {
    pub fn parse(text: &str) -> Option<Shape> {
        match text {
            "one_milestone" => Some(Shape::OneMilestone),
            "milestones" => Some(Shape::Milestones),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Shape::OneMilestone => "one_milestone",
            Shape::Milestones => "milestones",
        }
    }
}

/// The scripted model: strategic plan, tactical steps, a passing goal verdict.
pub struct ZeroModel {
    pub shape: Shape,
    pub steps: usize,
}

fn step(i: usize) -> Value {
    json!({"id": format!("s{i}"), "tool": "noop", "args": {"i": i},
           "expected_output": format!("artifact out_{i}")})
}

fn milestone(id: &str, depends_on: Vec<String>, artifact: usize) -> Value {
    json!({"id": id, "title": format!("milestone {id}"), "depends_on": depends_on, "effort": 1,
           "tools": ["noop"], "accept": {"type": "artifact", "name": format!("out_{artifact}")}})
}

impl ZeroModel {
    fn plan(&self) -> Value {
        let milestones: Vec<Value> = match self.shape {
            Shape::OneMilestone => vec![milestone("m0", vec![], self.steps.saturating_sub(1))],
            Shape::Milestones => (0..self.steps)
                .map(|i| {
                    let deps = if i == 0 {
                        vec![]
                    } else {
                        vec![format!("m{}", i - 1)]
                    };
                    milestone(&format!("m{i}"), deps, i)
                })
                .collect(),
        };
        json!({ "milestones": milestones })
    }

    fn steps_for(&self, milestone: Option<&str>) -> Result<Value, PortError> {
        let steps: Vec<Value> = match self.shape {
            Shape::OneMilestone => (0..self.steps).map(step).collect(),
            Shape::Milestones => {
                let index = milestone
                    .and_then(|m| m.strip_prefix('m'))
                    .and_then(|i| i.parse::<usize>().ok())
                    .ok_or_else(|| {
                        PortError::new(FailureKind::Permanent, "tactical call without milestone")
                    })?;
                vec![step(index)]
            }
        };
        Ok(json!({ "steps": steps }))
    }
}

#[async_trait]
impl ModelPort for ZeroModel {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        let value = match call.purpose {
            Purpose::Strategic => self.plan(),
            Purpose::Tactical => self.steps_for(call.milestone.as_deref())?,
            Purpose::Verifier => json!({"verdict": "pass", "reason": "every step ran"}),
            // Tasks are submitted with strategy `v2`, which forces the plan route.
            Purpose::Gate => {
                return Err(PortError::new(
                    FailureKind::Permanent,
                    "the benchmark does not script the gate",
                ));
            }
        };
        Ok(ModelReply {
            value,
            tokens: TOKENS_PER_CALL,
            ..ModelReply::default()
        })
    }
}

/// Holds tool calls until released; counts how many are waiting.
#[derive(Clone)]
pub struct Hold {
    release: watch::Receiver<bool>,
    pub waiting: Arc<AtomicUsize>,
}

impl Hold {
    /// A hold and the switch that releases it (send `true`).
    pub fn new() -> (Hold, watch::Sender<bool>) {
        let (tx, rx) = watch::channel(false);
        let hold = Hold {
            release: rx,
            waiting: Arc::new(AtomicUsize::new(0)),
        };
        (hold, tx)
    }
}

/// The one tool, `noop`: no side effects (as the peers' fake tool), one artifact per call.
pub struct NoopTools {
    pub hold: Option<Hold>,
}

#[async_trait]
impl ToolPort for NoopTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "noop".into(),
            description: "does nothing and reports success".into(),
            schema: json!({"type": "object", "required": ["i"],
                           "properties": {"i": {"type": "integer", "minimum": 0}}}),
            side_effects: false,
            artifacts: Vec::new(),
        }]
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        if let Some(hold) = &self.hold {
            hold.waiting.fetch_add(1, Ordering::SeqCst);
            let mut release = hold.release.clone();
            let _ = release.wait_for(|go| *go).await;
            hold.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        let i = call.args["i"].as_u64().unwrap_or_default();
        Ok(ToolReply {
            from_receipt: false,
            output: json!({"ok": true, "i": i}),
            artifacts: BTreeMap::from([(format!("out_{i}"), json!({"ok": true, "i": i}))]),
            error: None,
        })
    }
}
