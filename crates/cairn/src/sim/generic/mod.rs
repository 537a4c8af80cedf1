//! The generic mode: plausible answers for goals no scenario covers.
//!
//! It exists so `cairn serve` with no model configured still runs a task end to end (gate,
//! plan, steps, tool calls, checks, verdict) over two generic tools, `lookup` and `write_note`.
//! It is not a model: answers are fixed shapes filled with the goal's text, and everything it
//! produces is labelled simulated.

use serde_json::{Value, json};

use super::scenario::{SimTool, ToolRule};
use crate::domain::gate::{goal_targets, heuristic_features};
use crate::llm::Purpose;

/// The milestone id the direct act loop uses.
pub const DIRECT: &str = "direct";

/// The generic tools, added to every scenario that does not define tools of the same name.
pub fn tools() -> Vec<SimTool> {
    vec![
        SimTool {
            timeout_ms: None,
            name: "lookup".into(),
            description: "Look something up by a query (simulated: answers with a fixed finding). \
                          Produces the artifact `findings`."
                .into(),
            args_schema: json!({
                "type": "object",
                "required": ["query"],
                "properties": {"query": {"type": "string", "minLength": 1}},
                "additionalProperties": false
            }),
            side_effects: false,
            idempotent: true,
            artifacts: Vec::new(),
            latency_ms: None,
            rules: vec![rule(
                json!({"answer": "simulated finding about: {{args.query}}"}),
                json!({"findings": ["simulated finding about: {{args.query}}"]}),
            )],
        },
        SimTool {
            timeout_ms: None,
            name: "write_note".into(),
            description: "Write a note with a title and a text (simulated side effect: nothing \
                          is written anywhere). Produces the artifact `note`."
                .into(),
            args_schema: json!({
                "type": "object",
                "required": ["title", "text"],
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "text": {"type": "string"}
                },
                "additionalProperties": false
            }),
            side_effects: true,
            idempotent: true,
            artifacts: Vec::new(),
            latency_ms: None,
            rules: vec![rule(
                json!({"written": true, "title": "{{args.title}}"}),
                json!({"note": "{{args.text}}"}),
            )],
        },
    ]
}

fn rule(output: Value, artifacts: Value) -> ToolRule {
    ToolRule {
        args: None,
        after: Vec::new(),
        unless: Vec::new(),
        output,
        artifacts: artifacts.as_object().cloned(),
        error: None,
        latency_ms: None,
        fault: None,
        note: None,
    }
}

/// What the request is about: the `goal` of the first user message (the engine sends its input
/// as compact JSON), else that message's text.
pub fn goal_of(messages: &[Value]) -> String {
    let text = messages
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .or_else(|| messages.last())
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .unwrap_or("the goal");
    let goal = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|input| {
            input
                .get("goal")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| text.to_string());
    goal.chars().take(200).collect()
}

/// The tools the answer's schema lets it name: a plan's `tools` enum, a step's `tool` const.
/// Empty when the request carries no schema naming tools.
pub fn offered_tools(request: &Value) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(schema) = request.pointer("/response_format/json_schema/schema") {
        collect_tools(schema, &mut names);
    }
    names
}

fn collect_tools(schema: &Value, names: &mut Vec<String>) {
    let mut add = |name: &str| {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    };
    match schema {
        Value::Object(map) => {
            if let Some(name) = map
                .get("tool")
                .and_then(|t| t.get("const"))
                .and_then(Value::as_str)
            {
                add(name);
            }
            let listed = map
                .get("tools")
                .and_then(|t| t.pointer("/items/enum"))
                .and_then(Value::as_array);
            for name in listed.into_iter().flatten().filter_map(Value::as_str) {
                add(name);
            }
            for value in map.values() {
                collect_tools(value, names);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_tools(item, names)),
        _ => {}
    }
}

/// One request as the generic mode sees it.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub purpose: Purpose,
    /// The milestone (`X-Cairn-Milestone`), `direct` for the act loop.
    pub milestone: Option<&'a str>,
    pub attempt: u32,
    pub goal: &'a str,
    /// What the answer's schema allows ([`offered_tools`]); empty when unknown.
    pub offered: &'a [String],
}

impl Asked<'_> {
    /// Whether the answer may name `tool`: when the schema names no tool at all, it is unknown
    /// and the fixed shapes are answered.
    fn offers(&self, tool: &str) -> bool {
        self.offered.is_empty() || self.offered.iter().any(|t| t == tool)
    }
}

/// The generic answer: a plan within the tools offered, one step per target the goal names.
pub fn reply(asked: &Asked<'_>) -> Value {
    match asked.purpose {
        Purpose::Gate => gate(asked.goal),
        Purpose::Strategic => plan_within(asked),
        Purpose::Tactical => tactical(asked),
        Purpose::Verifier => json!({
            "verdict": "pass",
            "reason": "simulated verifier: no real check was made"
        }),
    }
}

fn tactical(asked: &Asked<'_>) -> Value {
    let milestone = asked.milestone.unwrap_or(DIRECT);
    if milestone == DIRECT {
        if asked.attempt > 1 {
            return json!({"done": true, "answer": format!("simulated answer about: {}", asked.goal)});
        }
        // The act loop takes at most three calls a round.
        return steps(milestone, lookups(asked.goal, 3));
    }
    // A milestone granted the write tool alone writes; the fixed plan's second milestone writes
    // when the schema does not say what was granted.
    let writes = match asked.offered.is_empty() {
        true => milestone == "m2",
        false => !asked.offers(LOOKUP) && asked.offers(WRITE),
    };
    match writes {
        true => steps(milestone, writes_for(asked.goal)),
        false => steps(milestone, lookups(asked.goal, MAX_STEPS)),
    }
}

const LOOKUP: &str = "lookup";
const WRITE: &str = "write_note";
/// A tactical step list holds at most this many steps.
const MAX_STEPS: usize = 12;

/// One lookup per named target (its name is the query, so the goal verifier sees it touched),
/// or one of the whole goal when it names none.
fn lookups(goal: &str, at_most: usize) -> Vec<(&'static str, Value)> {
    let targets = goal_targets(goal);
    if targets.is_empty() {
        let query = if goal.trim().is_empty() {
            "the goal"
        } else {
            goal
        };
        return vec![(LOOKUP, json!({ "query": query }))];
    }
    targets
        .into_iter()
        .take(at_most)
        .map(|target| (LOOKUP, json!({ "query": target })))
        .collect()
}

/// One note per named target, titled by it, or one summary note.
fn writes_for(goal: &str) -> Vec<(&'static str, Value)> {
    let targets = goal_targets(goal);
    if targets.is_empty() {
        let text = format!("simulated summary of: {goal}");
        return vec![(WRITE, json!({"title": "summary", "text": text}))];
    }
    targets
        .into_iter()
        .take(MAX_STEPS)
        .map(|target| {
            let text = format!("simulated change for {target}: {goal}");
            (WRITE, json!({"title": target, "text": text}))
        })
        .collect()
}

fn steps(milestone: &str, calls: Vec<(&'static str, Value)>) -> Value {
    let steps: Vec<Value> = calls
        .into_iter()
        .enumerate()
        .map(|(index, (tool, args))| {
            json!({"id": format!("{milestone}.s{}", index + 1), "tool": tool, "args": args,
                   "expected_output": "a simulated result"})
        })
        .collect();
    json!({ "steps": steps })
}

/// The gate's features, from the same reading of the goal the engine's heuristic makes.
fn gate(goal: &str) -> Value {
    let features = heuristic_features(goal, &[WRITE]);
    json!({
        "est_tool_calls": features.est_tool_calls.max(1),
        "touches_writes": features.touches_writes,
        "targets": features.targets,
        "goal_kind": features.goal_kind
    })
}

/// A plan within what the strategic schema offers: gather with `lookup` when offered, then
/// record with `write_note` when the engine offers it (it withholds a write tool from a goal
/// that only reads). The fixed two-milestone plan when the schema names neither.
fn plan_within(asked: &Asked<'_>) -> Value {
    if asked.offered.is_empty() || (!asked.offers(LOOKUP) && !asked.offers(WRITE)) {
        return plan();
    }
    let mut milestones = Vec::new();
    if asked.offers(LOOKUP) {
        milestones.push(gather("m1"));
    }
    if asked.offers(WRITE) {
        let after: Vec<&str> = milestones.iter().filter_map(|m| m["id"].as_str()).collect();
        let id = format!("m{}", milestones.len() + 1);
        milestones.push(record(&id, &after));
    }
    json!({ "milestones": milestones })
}

fn gather(id: &str) -> Value {
    json!({"id": id, "title": "Gather what the goal needs", "depends_on": [], "effort": 1,
           "tools": [LOOKUP], "outcome": "findings about the goal",
           "accept": {"type": "artifact", "name": "findings", "non_empty": true}})
}

fn record(id: &str, after: &[&str]) -> Value {
    json!({"id": id, "title": "Write up the result", "depends_on": after, "effort": 1,
           "tools": [WRITE], "outcome": "a note summarising the findings",
           "accept": {"type": "artifact", "name": "note", "non_empty": true}})
}

/// The fixed plan: gather with `lookup`, then record with `write_note`.
pub fn plan() -> Value {
    json!({"milestones": [gather("m1"), record("m2", &["m1"])]})
}

#[cfg(test)]
mod tests;
