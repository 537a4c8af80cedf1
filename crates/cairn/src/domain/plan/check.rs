//! Acceptance checks: the condition that proves a milestone is done, and its evaluation.
//!
//! A check a program can evaluate (a non-empty artifact, an artifact matching a JSON Schema, a
//! command's exit code) is far stronger evidence than a model's opinion, so every outcome carries
//! its [`Evidence`] and a `verifier` verdict is recorded as the weaker kind.
//!
//! Evaluation is pure: cairn never runs a shell or a model from here. The engine walks
//! [`Check::leaves`], performs the `command` leaves through the registered runner tool and the
//! `verifier` leaves through the verifier model, and hands their raw outputs to [`evaluate`] by
//! leaf index. Artifact and schema leaves are decided from the artifacts alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// Deepest nesting of `all` accepted from a planner; deeper is a sign of a confused model.
pub const MAX_CHECK_DEPTH: usize = 4;

/// The condition that proves a milestone is done. Wire shape: `{"type": ..., ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Check {
    /// The named artifact exists (and, with `non_empty`, is not null, "", [] or {}).
    Artifact {
        name: String,
        #[serde(default = "default_true")]
        non_empty: bool,
    },
    /// The named artifact validates against a JSON Schema.
    Schema {
        artifact: String,
        #[schema(value_type = Object)]
        schema: Value,
    },
    /// A registered runner tool is called with `args`; its output's `exit_code` must match.
    Command {
        tool: String,
        #[serde(default = "empty_object")]
        #[schema(value_type = Object)]
        args: Value,
        #[serde(default)]
        exit_code: i64,
    },
    /// The `verifier` model judges the outcome: weaker evidence, recorded as such.
    Verifier { prompt: String },
    /// The milestone's steps succeeded: none of its current list failed, and one that ran
    /// returned a non-empty output. It names nothing a tool might not produce, so the engine
    /// can always stand behind it: the check of a milestone whose tools declare no artifacts.
    StepsSucceeded,
    /// Every inner check must pass.
    All {
        #[schema(no_recursion)]
        checks: Vec<Check>,
    },
}

fn default_true() -> bool {
    true
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// How much a passing outcome can be trusted. Ordered weakest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// A model's verdict.
    Verifier,
    /// A program decided: artifact presence, schema validation, exit code.
    Programmatic,
}

/// What the engine obtained for one external leaf of a check.
#[derive(Debug, Clone, PartialEq)]
pub enum ExternalResult {
    /// The runner tool's `output` (expected to carry `exit_code`).
    Command(Value),
    /// The verifier model's parsed output: `{"verdict": "pass"|"fail", "reason": ...}`.
    Verdict(Value),
    /// The call could not be made or failed; the leaf fails with this reason.
    Unavailable(String),
    /// What the engine read off the milestone's own steps for a `steps_succeeded` leaf
    /// ([`super::backing::steps_succeeded`]): `Err` says what is missing.
    Steps(Result<(), String>),
}

/// The result of evaluating a check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CheckOutcome {
    pub passed: bool,
    /// The weakest evidence any leaf contributed.
    pub evidence: Evidence,
    /// Why it failed, one line per failing leaf (empty when passed).
    pub failures: Vec<String>,
}

impl Check {
    /// The non-`all` checks, depth first. Their positions are the leaf indices [`evaluate`]
    /// expects external results under.
    pub fn leaves(&self) -> Vec<&Check> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves<'a>(&'a self, out: &mut Vec<&'a Check>) {
        match self {
            Check::All { checks } => checks.iter().for_each(|c| c.collect_leaves(out)),
            leaf => out.push(leaf),
        }
    }

    /// True for leaves the engine must perform (a runner tool or the verifier model).
    pub fn is_external(&self) -> bool {
        matches!(self, Check::Command { .. } | Check::Verifier { .. })
    }

    /// Artifacts named by `artifact` and `schema` leaves, for the declared-artifacts rule.
    pub fn artifact_names(&self) -> Vec<&str> {
        self.leaves()
            .into_iter()
            .filter_map(|leaf| match leaf {
                Check::Artifact { name, .. } => Some(name.as_str()),
                Check::Schema { artifact, .. } => Some(artifact.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Runner tools named by `command` leaves, for the registered-tools rule.
    pub fn command_tools(&self) -> Vec<&str> {
        self.leaves()
            .into_iter()
            .filter_map(|leaf| match leaf {
                Check::Command { tool, .. } => Some(tool.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Repairs what a planner writes wrong without changing what the check means: in a schema
    /// leaf, a `required` list naming a property twice (which JSON Schema's meta-schema
    /// forbids, so the whole plan was refused, and which small models write: the 1.5B
    /// planner's `"required": ["status", "body", ..., "status"]`) keeps each name once, in its
    /// first place. Returns how many names it dropped.
    pub fn tidy(&mut self) -> usize {
        match self {
            Check::Schema { schema, .. } => dedupe_lists(schema),
            Check::All { checks } => checks.iter_mut().map(Check::tidy).sum(),
            Check::Artifact { .. }
            | Check::Command { .. }
            | Check::Verifier { .. }
            | Check::StepsSucceeded => 0,
        }
    }

    /// Structural problems, phrased for the planner: empty names, a schema that does not
    /// compile, an empty `all`, nesting deeper than [`MAX_CHECK_DEPTH`].
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_problems(1, &mut out);
        out
    }

    fn collect_problems(&self, depth: usize, out: &mut Vec<String>) {
        match self {
            Check::Artifact { name, .. } if name.trim().is_empty() => {
                out.push("artifact check needs a non-empty \"name\"".into())
            }
            Check::Schema { artifact, schema } => {
                if artifact.trim().is_empty() {
                    out.push("schema check needs a non-empty \"artifact\"".into());
                }
                if let Err(err) = crate::domain::dialect::validator(schema) {
                    out.push(format!(
                        "schema check has an invalid JSON Schema: {}",
                        super::error::short(&err)
                    ));
                }
            }
            Check::Command { tool, args, .. } => {
                if tool.trim().is_empty() {
                    out.push("command check needs a runner \"tool\"".into());
                }
                if !args.is_object() {
                    out.push("command check \"args\" must be an object".into());
                }
            }
            Check::Verifier { prompt } if prompt.trim().is_empty() => {
                out.push("verifier check needs a non-empty \"prompt\"".into())
            }
            Check::All { checks } => {
                if checks.is_empty() {
                    out.push("\"all\" check needs at least one inner check".into());
                } else if depth >= MAX_CHECK_DEPTH {
                    out.push(format!("checks nest deeper than {MAX_CHECK_DEPTH} levels"));
                } else {
                    checks
                        .iter()
                        .for_each(|c| c.collect_problems(depth + 1, out));
                }
            }
            _ => {}
        }
    }
}

/// Evaluates `check` against the milestone's artifacts and the engine's external results
/// (keyed by leaf index, see [`Check::leaves`]). A missing external result fails its leaf.
pub fn evaluate(
    check: &Check,
    artifacts: &BTreeMap<String, Value>,
    external: &BTreeMap<usize, ExternalResult>,
) -> CheckOutcome {
    let mut failures = Vec::new();
    let mut evidence = Evidence::Programmatic;
    for (index, leaf) in check.leaves().into_iter().enumerate() {
        if matches!(leaf, Check::Verifier { .. }) {
            evidence = Evidence::Verifier;
        }
        if let Err(reason) = evaluate_leaf(leaf, artifacts, external.get(&index)) {
            failures.push(reason);
        }
    }
    CheckOutcome {
        passed: failures.is_empty(),
        evidence,
        failures,
    }
}

fn evaluate_leaf(
    leaf: &Check,
    artifacts: &BTreeMap<String, Value>,
    external: Option<&ExternalResult>,
) -> Result<(), String> {
    match leaf {
        Check::Artifact { name, non_empty } => match artifacts.get(name) {
            None => Err(format!(
                "artifact {name:?} was not produced ({})",
                produced(artifacts)
            )),
            Some(value) if *non_empty && is_empty(value) => {
                Err(format!("artifact {name:?} is empty"))
            }
            Some(_) => Ok(()),
        },
        Check::Schema { artifact, schema } => {
            let value = artifacts.get(artifact).ok_or_else(|| {
                format!(
                    "artifact {artifact:?} was not produced ({})",
                    produced(artifacts)
                )
            })?;
            let validator = crate::domain::dialect::validator(schema)
                .map_err(|err| format!("invalid JSON Schema: {err}"))?;
            match validator.iter_errors(value).next() {
                None => Ok(()),
                Some(err) => Err(format!(
                    "artifact {artifact:?} does not match its schema at {:?}: {}",
                    err.instance_path.to_string(),
                    super::error::short(&err.to_string())
                )),
            }
        }
        Check::Command {
            tool, exit_code, ..
        } => match external {
            Some(ExternalResult::Command(output)) => {
                match output.get("exit_code").and_then(Value::as_i64) {
                    Some(code) if code == *exit_code => Ok(()),
                    // What the command printed says what is wrong: the repair is shown it.
                    Some(code) => Err(format!(
                        "{tool} exited with {code}, expected {exit_code}{}",
                        printed(output)
                    )),
                    None => Err(format!("{tool} output has no integer \"exit_code\"")),
                }
            }
            Some(ExternalResult::Unavailable(reason)) => Err(format!(
                "{tool} could not run: {}",
                super::error::short(reason)
            )),
            _ => Err(format!("command check via {tool} was not run")),
        },
        Check::Verifier { .. } => match external {
            Some(ExternalResult::Verdict(output)) => match parse_verdict(output) {
                Ok((true, _)) => Ok(()),
                Ok((false, reason)) => Err(format!("verifier said fail: {reason}")),
                Err(reason) => Err(reason),
            },
            Some(ExternalResult::Unavailable(reason)) => Err(format!(
                "verifier unavailable: {}",
                super::error::short(reason)
            )),
            _ => Err("verifier check was not run".into()),
        },
        Check::StepsSucceeded => match external {
            Some(ExternalResult::Steps(result)) => result.clone(),
            _ => Err("the milestone's steps were not looked at".into()),
        },
        // `leaves` never yields `all`; an empty one cannot pass.
        Check::All { .. } => Err("empty \"all\" check".into()),
    }
}

/// Keywords whose value is data, not schema: nothing inside them is tidied.
const DATA_KEYWORDS: [&str; 4] = ["const", "default", "examples", "enum"];

/// [`Check::tidy`] on one schema, through every subschema. Returns the items dropped.
fn dedupe_lists(schema: &mut Value) -> usize {
    match schema {
        Value::Object(map) => {
            let mut dropped = 0;
            for (key, value) in map.iter_mut() {
                if let ("required", Value::Array(items)) = (key.as_str(), &mut *value) {
                    let before = items.len();
                    let mut seen: Vec<Value> = Vec::with_capacity(before);
                    items.retain(|item| {
                        let first = !seen.contains(item);
                        if first {
                            seen.push(item.clone());
                        }
                        first
                    });
                    dropped += before - items.len();
                }
                if !DATA_KEYWORDS.contains(&key.as_str()) {
                    dropped += dedupe_lists(value);
                }
            }
            dropped
        }
        Value::Array(items) => items.iter_mut().map(dedupe_lists).sum(),
        _ => 0,
    }
}

/// What a failed artifact leaf says was produced instead, so a repair can see it.
fn produced(artifacts: &BTreeMap<String, Value>) -> String {
    if artifacts.is_empty() {
        return "the steps produced no artifact".into();
    }
    let names: Vec<&str> = artifacts.keys().take(10).map(String::as_str).collect();
    format!("produced: {}", names.join(", "))
}

/// Null, a blank string, an empty list or object: nothing a check can stand behind.
pub fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests;
mod verdict;

pub use verdict::parse_verdict;

/// What a failed command printed, its error stream first, as `": ..."` (empty when it printed
/// nothing).
fn printed(output: &Value) -> String {
    let text = |field: &str| {
        output
            .get(field)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
    };
    match text("stderr").or_else(|| text("stdout")) {
        Some(said) => format!(": {}", super::error::short(said)),
        None => String::new(),
    }
}
