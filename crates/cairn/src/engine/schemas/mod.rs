//! The JSON Schema of every answer the engine asks a model for, sent as `response_format`
//! (`json_schema`, strict) so a grammar-constrained server cannot invent the shape, and checked
//! again on receipt by the client. One hand-kept module, tested against the parsers the answers
//! go into (`schemas_tests.rs`): each prompt's worked example validates here and parses there.
//!
//! Schemas that name tools are built per call: the tactical and act schemas allow only the
//! tools the milestone (or the direct route) may use, each with its own argument schema
//! (`oneOf` by tool); the strategic schema allows only registered tools and the five check
//! shapes. Native `tools`/`tool_calls` are not used: small local models do not support them.

use serde_json::{Value, json};

use super::runtime::ports::ToolSpec;

/// The gate's features (`domain::gate::GateFeatures`).
pub fn gate() -> Value {
    json!({
        "type": "object",
        "properties": {
            "est_tool_calls": {"type": "integer", "minimum": 0, "maximum": 50},
            "touches_writes": {"type": "boolean"},
            "targets": {"type": "integer", "minimum": 0, "maximum": 50},
            "goal_kind": {"type": "string", "minLength": 1, "maxLength": 60}
        },
        "required": ["est_tool_calls", "touches_writes", "targets", "goal_kind"],
        "additionalProperties": false
    })
}

/// A strategic plan (`domain::plan::Plan::from_value`) over the registered `tools`.
pub fn strategic(tools: &[&ToolSpec]) -> Value {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let runners = runners(tools);
    let declared = declared_artifacts(tools);
    let shapes = Shapes {
        runners: &runners,
        artifacts: &declared,
    };
    json!({
        "type": "object",
        "properties": {
            "milestones": {
                "type": "array", "minItems": 0, "maxItems": 6,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "minLength": 1, "maxLength": 40},
                        "title": {"type": "string", "minLength": 1, "maxLength": 100},
                        "depends_on": {"type": "array", "maxItems": 6,
                                       "items": {"type": "string", "minLength": 1, "maxLength": 40}},
                        "effort": {"type": "integer", "minimum": 1, "maximum": 10},
                        // Bounded: a small model under a grammar can repeat an item forever.
                        "tools": {"type": "array", "maxItems": names.len().max(1),
                                  "items": one_of_names(&names)},
                        "outcome": {"type": "string", "maxLength": 200},
                        "accept": check(&shapes, true)
                    },
                    "required": ["id", "title", "depends_on", "effort", "tools", "outcome", "accept"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["milestones"],
        "additionalProperties": false
    })
}

/// The tools a `command` check may call: command runners (by name or description: `run`,
/// `command`, `exit code`). A `command` check calls a registered runner, never an arbitrary
/// tool; with no runner registered the shape is not offered at all.
fn runners<'a>(tools: &[&'a ToolSpec]) -> Vec<&'a str> {
    tools
        .iter()
        .filter(|t| {
            let name = t.name.to_lowercase();
            let description = t.description.to_lowercase();
            name == "run"
                || name.contains("runner")
                || name.contains("command")
                || description.contains("exit code")
                || description.contains("exit_code")
        })
        .map(|t| t.name.as_str())
        .collect()
}

/// The artifact names `tools` declare, sorted and distinct, when every one of them declares
/// some: a check then names one of them (plan validation holds each milestone to its own
/// tools'). Empty when any tool declares none: what it names its artifacts is unknown, so any
/// name stays allowed.
fn declared_artifacts<'a>(tools: &[&'a ToolSpec]) -> Vec<&'a str> {
    if tools.iter().any(|t| t.artifacts.is_empty()) {
        return Vec::new();
    }
    let names: std::collections::BTreeSet<&str> = tools
        .iter()
        .flat_map(|t| t.artifacts.iter().map(String::as_str))
        .collect();
    names.into_iter().collect()
}

/// What the check shapes may name: the runner tools a `command` check calls, and the declared
/// artifacts (empty: any name).
struct Shapes<'a> {
    runners: &'a [&'a str],
    artifacts: &'a [&'a str],
}

/// The check shapes (`domain::plan::check::Check`); `all` nests one level; `command` only over
/// `runners`; artifact names only among the declared ones when tools declare any (a name no
/// granted tool declares is made `steps_succeeded` before the plan runs,
/// [`crate::domain::plan::backing`]).
fn check(may: &Shapes, nest: bool) -> Value {
    let runners = may.runners;
    let artifact = if may.artifacts.is_empty() {
        json!({"type": "string", "minLength": 1, "maxLength": 60})
    } else {
        json!({"type": "string", "enum": may.artifacts})
    };
    let mut shapes = vec![
        json!({"type": "object", "properties": {"type": {"const": "steps_succeeded"}},
               "required": ["type"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "type": {"const": "verifier"}, "prompt": {"type": "string", "minLength": 1,
                                                      "maxLength": 300}},
            "required": ["type", "prompt"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "type": {"const": "artifact"}, "name": artifact,
            "non_empty": {"type": "boolean"}},
            "required": ["type", "name"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "type": {"const": "schema"}, "artifact": artifact,
            // A small schema the planner can write in a few tokens: the value's type and the
            // fields it must have (a free-form schema lets a small model write without end).
            "schema": {"type": "object", "properties": {
                "type": {"enum": ["object", "array", "string", "number", "integer", "boolean"]},
                "required": {"type": "array", "maxItems": 8,
                             "items": {"type": "string", "minLength": 1, "maxLength": 60}}},
                "required": ["type"], "additionalProperties": false}},
            "required": ["type", "artifact", "schema"], "additionalProperties": false}),
    ];
    if !runners.is_empty() {
        shapes.push(json!({"type": "object", "properties": {
            "type": {"const": "command"}, "tool": one_of_names(runners),
            "args": {"type": "object", "maxProperties": 6}, "exit_code": {"type": "integer"}},
            "required": ["type", "tool"], "additionalProperties": false}));
    }
    if nest {
        shapes.push(json!({"type": "object", "properties": {
            "type": {"const": "all"},
            "checks": {"type": "array", "minItems": 1, "maxItems": 4,
                       "items": check(may, false)}},
            "required": ["type", "checks"], "additionalProperties": false}));
    }
    json!({"oneOf": shapes})
}

fn one_of_names(names: &[&str]) -> Value {
    if names.is_empty() {
        // No tool at all: nothing can be named (an empty enum is not valid JSON Schema).
        json!({"type": "string", "not": {}})
    } else {
        json!({"type": "string", "enum": names})
    }
}

/// One step calling one of `tools`, with that tool's own argument schema; `expected_output`
/// is asked for (required) in planned steps and allowed in the others.
fn step(tools: &[&ToolSpec], expected_output: bool) -> Value {
    // One branch per tool: a tool named twice would make every step that calls it valid under
    // two branches of the `oneOf`, and so refused.
    let mut seen = std::collections::BTreeSet::new();
    let shapes: Vec<Value> = tools
        .iter()
        .filter(|tool| seen.insert(tool.name.as_str()))
        .map(|tool| {
            let mut properties = json!({
                "id": {"type": "string", "minLength": 1, "maxLength": 40},
                "tool": {"const": tool.name},
                "args": args_schema(&tool.schema)
            });
            properties["expected_output"] = json!({"type": "string", "maxLength": 200});
            let mut required = vec!["id", "tool", "args"];
            if expected_output {
                required.push("expected_output");
            }
            json!({"type": "object", "properties": properties, "required": required,
                   "additionalProperties": false})
        })
        .collect();
    match shapes.len() {
        0 => json!({"not": {}}),
        1 => shapes.into_iter().next().unwrap_or(Value::Null),
        _ => json!({"oneOf": shapes}),
    }
}

/// A tool's argument schema, or any object when it registered none.
fn args_schema(schema: &Value) -> Value {
    if schema.is_object() && schema.as_object().is_some_and(|o| !o.is_empty()) {
        schema.clone()
    } else {
        json!({"type": "object"})
    }
}

/// A tactical step list (`domain::plan::StepList`) for a milestone allowed `tools`; a
/// continuation may be empty (the milestone's steps are done).
pub fn tactical(tools: &[&ToolSpec], continuing: bool) -> Value {
    let min_items = u8::from(!continuing);
    json!({
        "type": "object",
        "properties": {
            "steps": {"type": "array", "minItems": min_items, "maxItems": 12,
                      "items": step(tools, true)}
        },
        "required": ["steps"],
        "additionalProperties": false
    })
}

/// The final answer of an act loop: `{"done": true, "answer": ...}`.
fn done() -> Value {
    json!({"type": "object", "properties": {"done": {"const": true}, "answer": {}},
           "required": ["done", "answer"], "additionalProperties": false})
}

/// One round of the direct act loop: tool calls, or the answer.
pub fn direct(tools: &[&ToolSpec]) -> Value {
    if tools.is_empty() {
        // The last round: only the answer.
        return done();
    }
    json!({"oneOf": [
        {"type": "object",
         "properties": {"steps": {"type": "array", "minItems": 1, "maxItems": 3,
                                  "items": step(tools, false)}},
         "required": ["steps"], "additionalProperties": false},
        done()
    ]})
}

/// A verdict (`domain::plan::check::parse_verdict`), for the goal and for `verifier` checks.
pub fn verdict() -> Value {
    json!({
        "type": "object",
        "properties": {
            // First what the goal needs and whether the evidence shows it, then the verdict:
            // a model that lists the evidence judges it instead of echoing an example.
            "requirements": {"type": "array", "maxItems": 6, "items": {
                "type": "object",
                "properties": {
                    "need": {"type": "string", "minLength": 1, "maxLength": 120},
                    "met": {"type": "boolean"},
                    "evidence": {"type": "string", "maxLength": 200}
                },
                "required": ["need", "met", "evidence"],
                "additionalProperties": false
            }},
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
            "reason": {"type": "string", "maxLength": 300}
        },
        "required": ["verdict", "reason"],
        "additionalProperties": false
    })
}

/// Baseline A's answer.
pub fn one_shot() -> Value {
    json!({"type": "object", "properties": {"answer": {}}, "required": ["answer"],
           "additionalProperties": false})
}

/// Baseline B's move: one tool call, or the answer.
pub fn reactive(tools: &[&ToolSpec]) -> Value {
    let calls: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({"type": "object",
                   "properties": {"tool": {"const": tool.name}, "args": args_schema(&tool.schema)},
                   "required": ["tool", "args"], "additionalProperties": false})
        })
        .chain(std::iter::once(done()))
        .collect();
    json!({"oneOf": calls})
}

/// Baseline C's full list of steps.
pub fn v1(tools: &[&ToolSpec]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "steps": {"type": "array", "minItems": 1, "maxItems": 20, "items": step(tools, false)}
        },
        "required": ["steps"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests;
