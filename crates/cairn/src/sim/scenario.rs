//! Scenario files: what the simulator answers, as data.
//!
//! A scenario scripts model replies (matched on purpose, milestone and attempt, each with its
//! token usage), tools with small state rules, latency, and injected faults. The format is
//! documented with examples in `docs/scenarios.md`; files are JSON or TOML (by extension).
//! Everything is checked when the file is loaded, so a typo fails `cairn sim` at start rather
//! than a test half-way through.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::llm::Purpose;
use crate::schema;

/// The model name the simulator answers with unless a scenario sets another.
pub const SIM_MODEL: &str = "cairn-sim";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Reported as the answering model; always labelled simulated besides.
    #[serde(default = "default_model")]
    pub model: String,
    /// Latency added to every call without its own `latency_ms`.
    #[serde(default)]
    pub latency_ms: u64,
    /// Answer requests no reply matches with the generic mode (else HTTP 404).
    #[serde(default = "yes")]
    pub generic_fallback: bool,
    #[serde(default)]
    pub replies: Vec<Reply>,
    #[serde(default)]
    pub tools: Vec<SimTool>,
}

fn default_model() -> String {
    SIM_MODEL.to_string()
}

fn yes() -> bool {
    true
}

/// One scripted model reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub purpose: Purpose,
    /// Matches `X-Cairn-Milestone` when set.
    #[serde(default)]
    pub milestone: Option<String>,
    /// Matches `X-Cairn-Attempt` when set (a request without the header is attempt 1).
    #[serde(default)]
    pub attempt: Option<u32>,
    /// Matches only a request whose messages contain this text: a scripted model that answers
    /// right only when it was shown what it needs.
    #[serde(default)]
    pub input_contains: Option<String>,
    /// The answer as JSON (sent as the message content, serialised).
    #[serde(default)]
    pub json: Option<Value>,
    /// The answer as raw text (to script prose, fenced blocks or broken output).
    #[serde(default)]
    pub content: Option<String>,
    /// Token usage reported with the answer; without it the answer has no `usage` object.
    #[serde(default)]
    pub usage: Option<ScriptedUsage>,
    #[serde(default)]
    pub latency_ms: Option<u64>,
    #[serde(default)]
    pub fault: Option<Fault>,
    /// Free text for readers of the scenario; ignored.
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
}

impl ScriptedUsage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// The kinds of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// HTTP 500 (or `status`, any 5xx).
    #[serde(rename = "http_500")]
    Http500,
    /// HTTP 410 Gone: a permanent failure, not retried (a tool that no longer exists).
    Gone,
    /// HTTP 429 with `Retry-After: retry_after_s`.
    RateLimit,
    /// No answer for `ms` milliseconds (past the client's timeout), then the normal answer.
    Hang,
    /// HTTP 200 whose message content is broken JSON.
    MalformedJson,
    /// HTTP 200 whose body stops half-way (the connection is cut).
    TruncatedBody,
    /// A plan with a `flaw` (strategic replies only).
    InvalidPlan,
}

/// What makes an invalid plan invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanFlaw {
    Cycle,
    UnknownDependency,
    DuplicateId,
    UnknownTool,
}

/// An injected fault: applies to the first `times` matching requests of each task (all of them
/// when `times` is absent), after which the rule answers normally.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub kind: FaultKind,
    #[serde(default)]
    pub times: Option<u32>,
    /// For `http_500`: the status to answer (500..=599).
    #[serde(default)]
    pub status: Option<u16>,
    /// For `rate_limit`: the `Retry-After` seconds (default 1).
    #[serde(default)]
    pub retry_after_s: Option<u64>,
    /// For `hang`: how long (default 600000).
    #[serde(default)]
    pub ms: Option<u64>,
    /// For `invalid_plan`.
    #[serde(default)]
    pub flaw: Option<PlanFlaw>,
}

/// A simulated tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimTool {
    pub name: String,
    pub description: String,
    #[serde(default = "any_object")]
    pub args_schema: Value,
    pub side_effects: bool,
    #[serde(default)]
    pub idempotent: bool,
    /// The artifacts the tool declares it produces (the registered tool's `artifacts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub latency_ms: Option<u64>,
    /// The registered tool's `timeout_ms` (default 30,000): a `hang` fault longer than it is a
    /// client-side timeout.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Evaluated in order; the first whose conditions hold answers. None: `{"output": {"ok": true}}`.
    #[serde(default)]
    pub rules: Vec<ToolRule>,
}

fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}

/// A conditional answer of a tool. Conditions: `args` (each listed argument equal), `after`
/// (each pattern matched by an earlier successful call of the same task), `unless` (no such
/// call). Strings in the answer may use `{{args.NAME}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRule {
    #[serde(default)]
    pub args: Option<Map<String, Value>>,
    #[serde(default)]
    pub after: Vec<CallPattern>,
    #[serde(default)]
    pub unless: Vec<CallPattern>,
    #[serde(default)]
    pub output: Value,
    #[serde(default)]
    pub artifacts: Option<Map<String, Value>>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub latency_ms: Option<u64>,
    #[serde(default)]
    pub fault: Option<Fault>,
    #[serde(default)]
    pub note: Option<String>,
}

/// An earlier call: a tool name and, optionally, arguments it must have had.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallPattern {
    pub tool: String,
    #[serde(default)]
    pub args: Option<Map<String, Value>>,
}

/// True when every listed argument is present in `args` with an equal value.
pub fn args_match(pattern: Option<&Map<String, Value>>, args: &Value) -> bool {
    pattern.is_none_or(|pattern| {
        pattern
            .iter()
            .all(|(name, expected)| args.get(name) == Some(expected))
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("scenario {path}: {message}")]
    Parse { path: String, message: String },
    #[error("scenario {name:?}: {at}: {message}")]
    Invalid {
        name: String,
        at: String,
        message: String,
    },
}

impl Scenario {
    /// Loads a `.json` or `.toml` scenario file and checks it.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: shown.clone(),
            source,
        })?;
        let is_toml = path.extension().is_some_and(|ext| ext == "toml");
        let scenario: Scenario = if is_toml {
            toml::from_str(&text).map_err(|error| ScenarioError::Parse {
                path: shown.clone(),
                message: error.to_string(),
            })?
        } else {
            serde_json::from_str(&text).map_err(|error| ScenarioError::Parse {
                path: shown.clone(),
                message: error.to_string(),
            })?
        };
        scenario.check()?;
        Ok(scenario)
    }

    /// An empty scenario: everything is answered by the generic mode.
    pub fn generic() -> Scenario {
        Scenario {
            name: "generic".into(),
            description: "No scripted replies: the generic mode answers every goal.".into(),
            model: default_model(),
            latency_ms: 0,
            generic_fallback: true,
            replies: Vec::new(),
            tools: Vec::new(),
        }
    }

    /// Structural checks the types cannot express.
    pub fn check(&self) -> Result<(), ScenarioError> {
        let invalid = |at: String, message: &str| ScenarioError::Invalid {
            name: self.name.clone(),
            at,
            message: message.to_string(),
        };
        for (index, reply) in self.replies.iter().enumerate() {
            let at = format!("replies[{index}] ({} {:?})", reply.purpose, reply.milestone);
            if reply.json.is_some() && reply.content.is_some() {
                return Err(invalid(at, "set `json` or `content`, not both"));
            }
            if reply.attempt == Some(0) {
                return Err(invalid(at, "attempts count from 1"));
            }
            if let Some(fault) = &reply.fault {
                check_fault(fault).map_err(|message| invalid(at.clone(), &message))?;
                if fault.kind == FaultKind::InvalidPlan && reply.purpose != Purpose::Strategic {
                    return Err(invalid(
                        at,
                        "invalid_plan faults apply to strategic replies",
                    ));
                }
            }
        }
        let mut names = BTreeSet::new();
        for tool in &self.tools {
            let at = format!("tools.{}", tool.name);
            if !names.insert(tool.name.as_str()) {
                return Err(invalid(at, "tool defined twice"));
            }
            if let Err(message) = schema::compile(&tool.args_schema) {
                return Err(invalid(at, &format!("args_schema: {message}")));
            }
            for (index, rule) in tool.rules.iter().enumerate() {
                let at = format!("{at}.rules[{index}]");
                if let Some(fault) = &rule.fault {
                    check_fault(fault).map_err(|message| invalid(at.clone(), &message))?;
                    if fault.kind == FaultKind::InvalidPlan {
                        return Err(invalid(at, "invalid_plan is a model fault"));
                    }
                }
                for pattern in rule.after.iter().chain(&rule.unless) {
                    if !self.tools.iter().any(|t| t.name == pattern.tool) {
                        return Err(invalid(
                            at,
                            &format!("refers to unknown tool {:?}", pattern.tool),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

fn check_fault(fault: &Fault) -> Result<(), String> {
    match fault.kind {
        FaultKind::Http500 if fault.status.is_some_and(|s| !(500..=599).contains(&s)) => {
            return Err("http_500: status must be 500..=599".into());
        }
        FaultKind::InvalidPlan if fault.flaw.is_none() => {
            return Err("invalid_plan needs a `flaw`".into());
        }
        _ => {}
    }
    if fault.times == Some(0) {
        return Err("fault.times must be at least 1 (omit it for every request)".into());
    }
    Ok(())
}
