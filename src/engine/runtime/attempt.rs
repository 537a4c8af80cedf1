//! What every part of one task's run shares: the journal, the ports, the settings, the tool
//! registry, and the two ways of spending budget (asking a model, calling a tool), each timed
//! here so wall-clock charges do not depend on what a port reports.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::Value;

use super::checkpoint::{Journal, Spend};
use super::ports::{
    ModelCall, ModelPort, ModelReply, PortError, Purpose, ToolCall, ToolPort, ToolReply, ToolSpec,
};
use crate::domain::settings::EngineSettings;
use crate::domain::task::Task;
use crate::engine::{RunOutcome, StopSignal};

/// A model answer or failure, with what it cost.
pub struct Asked {
    pub reply: Result<ModelReply, PortError>,
    pub spend: Spend,
}

/// A tool answer or failure, with what it cost.
pub struct Called {
    pub reply: Result<ToolReply, PortError>,
    pub spend: Spend,
}

/// The shared context of one attempt at a task.
pub struct Attempt {
    pub journal: Journal,
    pub models: Arc<dyn ModelPort>,
    pub tools: Arc<dyn ToolPort>,
    pub config: EngineSettings,
    pub specs: BTreeMap<String, ToolSpec>,
    /// Set when one milestone's outcome ends the others' runs (failure, exhaustion, L3).
    pub halt: std::sync::atomic::AtomicBool,
}

impl Attempt {
    /// True when the run should stop at the next durable point.
    pub fn stopping(&self) -> bool {
        self.halt.load(Ordering::SeqCst) || self.journal.ctx().stop_requested().is_some()
    }

    pub fn stop_outcome(&self) -> RunOutcome {
        match self.journal.ctx().stop_requested() {
            Some(StopSignal::LeaseLost) => RunOutcome::LeaseLost,
            _ => RunOutcome::Yielded,
        }
    }

    pub fn task(&self) -> &Task {
        &self.journal.ctx().task
    }

    /// Asks a model; the spend includes the tokens of a failed call, which were still used.
    pub async fn ask(
        &self,
        purpose: Purpose,
        milestone: Option<&str>,
        attempt: u32,
        prompt: &str,
        input: Value,
    ) -> Asked {
        let started = Instant::now();
        let reply = self
            .models
            .complete(ModelCall {
                purpose,
                task_id: self.task().id,
                milestone: milestone.map(str::to_string),
                attempt,
                prompt: prompt.to_string(),
                input,
                schema: None,
            })
            .await;
        let tokens = match &reply {
            Ok(reply) => reply.tokens,
            Err(error) => error.tokens,
        };
        Asked {
            reply,
            spend: Spend {
                tokens,
                tool_calls: 0,
                wall_ms: elapsed_ms(started),
            },
        }
    }

    /// Calls a tool with an idempotency identity `(milestone, step, attempt)`.
    pub async fn call_tool(&self, call: ToolCall) -> Called {
        let started = Instant::now();
        let reply = self.tools.call(call).await;
        Called {
            reply,
            spend: Spend {
                tokens: 0,
                tool_calls: 1,
                wall_ms: elapsed_ms(started),
            },
        }
    }

    /// Full schemas of the named tools, for the tactical prompt.
    pub fn tool_schemas(&self, names: &[String]) -> Vec<&ToolSpec> {
        names.iter().filter_map(|n| self.specs.get(n)).collect()
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Shortens a value for an event or a prompt: long strings are cut, long arrays trimmed.
pub fn brief(value: &Value, max_chars: usize) -> Value {
    let text = value.to_string();
    if text.len() <= max_chars {
        return value.clone();
    }
    let cut: String = text.chars().take(max_chars).collect();
    Value::String(format!("{cut}…"))
}
