//! The simulator's memory: per-task fault counters and tool-call history, and the counters
//! tests read from `GET /sim/stats`.
//!
//! Fault counters and tool history are kept per task (`X-Cairn-Task`), so many tasks can run
//! one scenario at once (the evaluation does) without one task's calls changing what another
//! sees.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::scenario::Scenario;
use crate::domain::plan::fingerprint::canonical_json;

/// At most this many model requests are kept for `GET /sim/stats`.
const MAX_RECORDED_REQUESTS: usize = 2000;

/// What `GET /sim/stats` returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimStats {
    pub simulated: bool,
    pub scenario: String,
    pub llm: LlmStats,
    /// By tool name; every tool of the scenario is listed, called or not.
    pub tools: BTreeMap<String, ToolStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmStats {
    /// HTTP requests to the chat endpoint, faulted ones included.
    pub calls: u64,
    pub by_purpose: BTreeMap<String, u64>,
    pub faults_injected: u64,
    /// Tokens reported in successful answers.
    pub tokens: u64,
    /// The most recent requests, oldest first.
    pub requests: Vec<LlmRequestRecord>,
}

/// One model request as the simulator saw it (never the API key; only whether one was sent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmRequestRecord {
    pub purpose: Option<String>,
    pub task: Option<String>,
    pub milestone: Option<String>,
    pub attempt: Option<u32>,
    /// Whether an `Authorization: Bearer` header came with the request.
    pub authorized: bool,
    /// Whether the request asked for structured output (`response_format`).
    pub response_format: bool,
    /// `replies[N]`, `generic` or `none`, then `+fault:KIND` when a fault was injected.
    pub answered_with: String,
    /// The W3C `traceparent` the request carried, if any (cairn sends its call's span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolStats {
    /// HTTP requests, faulted ones included.
    pub calls: u64,
    /// Distinct `Idempotency-Key` values seen.
    pub distinct_keys: u64,
    pub calls_without_key: u64,
    pub faults_injected: u64,
    /// Distinct argument sets seen: (task, canonical args) pairs, object keys sorted, so two
    /// requests with the same arguments in another key order count once. A request refused
    /// for malformed or invalid arguments is not counted here.
    #[serde(default)]
    pub distinct_args: u64,
    /// The most requests any one argument set got (per task): 1 when no action was sent twice.
    #[serde(default)]
    pub max_calls_per_args: u64,
}

/// What the simulator remembers of one tool beyond its counters.
#[derive(Debug, Default)]
struct ToolMemory {
    stats: ToolStats,
    keys: BTreeSet<String>,
    /// (task, canonical args) -> requests.
    args: HashMap<(String, String), u64>,
}

/// One tool request as it is counted.
pub struct ToolRequest<'a> {
    pub tool: &'a str,
    pub task: &'a str,
    pub key: Option<&'a str>,
    /// The request's arguments, when they parsed and passed the tool's schema.
    pub args: Option<&'a Value>,
    pub faulted: bool,
}

#[derive(Debug, Default)]
struct Inner {
    llm: LlmStats,
    tools: BTreeMap<String, ToolMemory>,
    /// (rule id, task) -> matching requests so far.
    fault_counts: HashMap<(String, String), u32>,
    /// task -> successful tool calls (name, args), in order.
    history: HashMap<String, Vec<(String, Value)>>,
}

/// Shared by every handler of one simulator.
#[derive(Debug)]
pub struct SimState {
    pub scenario: Scenario,
    inner: Mutex<Inner>,
    ids: AtomicU64,
}

impl SimState {
    pub fn new(scenario: Scenario) -> SimState {
        let mut inner = Inner::default();
        for tool in &scenario.tools {
            inner.tools.insert(tool.name.clone(), Default::default());
        }
        SimState {
            scenario,
            inner: Mutex::new(inner),
            ids: AtomicU64::new(1),
        }
    }

    /// A fresh number for completion ids.
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one request against a fault rule; true while the fault still applies.
    pub fn take_fault(&self, rule: &str, task: &str, times: Option<u32>) -> bool {
        let mut inner = self.lock();
        let seen = inner
            .fault_counts
            .entry((rule.to_string(), task.to_string()))
            .or_insert(0);
        *seen += 1;
        times.is_none_or(|times| *seen <= times)
    }

    /// Counts a model request when it arrives (so hung requests count too).
    pub fn record_llm(&self, record: LlmRequestRecord, faulted: bool) {
        let mut inner = self.lock();
        inner.llm.calls += 1;
        if let Some(purpose) = &record.purpose {
            *inner.llm.by_purpose.entry(purpose.clone()).or_insert(0) += 1;
        }
        if faulted {
            inner.llm.faults_injected += 1;
        }
        if inner.llm.requests.len() >= MAX_RECORDED_REQUESTS {
            inner.llm.requests.remove(0);
        }
        inner.llm.requests.push(record);
    }

    /// Adds the tokens of an answer that was sent whole.
    pub fn add_tokens(&self, tokens: u64) {
        self.lock().llm.tokens += tokens;
    }

    pub fn record_tool_request(&self, request: ToolRequest<'_>) {
        let mut inner = self.lock();
        let memory = inner.tools.entry(request.tool.to_string()).or_default();
        let stats = &mut memory.stats;
        stats.calls += 1;
        match request.key {
            Some(key) => {
                memory.keys.insert(key.to_string());
                stats.distinct_keys = memory.keys.len() as u64;
            }
            None => stats.calls_without_key += 1,
        }
        if request.faulted {
            stats.faults_injected += 1;
        }
        if let Some(args) = request.args {
            let same = (request.task.to_string(), canonical_json(args));
            let seen = memory.args.entry(same).or_insert(0);
            *seen += 1;
            stats.max_calls_per_args = stats.max_calls_per_args.max(*seen);
            stats.distinct_args = memory.args.len() as u64;
        }
    }

    /// Remembers a successful call, for `after` / `unless` conditions.
    pub fn remember_call(&self, task: &str, tool: &str, args: &Value) {
        self.lock()
            .history
            .entry(task.to_string())
            .or_default()
            .push((tool.to_string(), args.clone()));
    }

    /// The successful calls of a task so far.
    pub fn history(&self, task: &str) -> Vec<(String, Value)> {
        self.lock().history.get(task).cloned().unwrap_or_default()
    }

    pub fn stats(&self) -> SimStats {
        let inner = self.lock();
        SimStats {
            simulated: true,
            scenario: self.scenario.name.clone(),
            llm: inner.llm.clone(),
            tools: inner
                .tools
                .iter()
                .map(|(name, memory)| (name.clone(), memory.stats.clone()))
                .collect(),
        }
    }

    /// Forgets counters, fault counts and history (the scenario stays).
    pub fn reset(&self) {
        let mut inner = self.lock();
        let names: Vec<String> = inner.tools.keys().cloned().collect();
        *inner = Inner::default();
        for name in names {
            inner.tools.insert(name, Default::default());
        }
    }
}
