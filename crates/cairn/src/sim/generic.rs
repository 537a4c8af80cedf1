//! The generic mode: plausible answers for goals no scenario covers.
//!
//! It exists so `cairn serve` with no model configured still runs a task end to end (gate,
//! plan, steps, tool calls, checks, verdict) over two generic tools, `lookup` and `write_note`.
//! It is not a model: answers are fixed shapes filled with the goal's text, and everything it
//! produces is labelled simulated.

use serde_json::{Value, json};

use super::scenario::{SimTool, ToolRule};
use crate::llm::Purpose;

/// Words that mark a goal as touching the world; the gate then plans.
const WRITE_WORDS: &[&str] = &[
    "deploy", "delete", "remove", "send", "pay", "write", "rename", "create", "update", "patch",
    "change", "edit", "fix", "migrate", "install",
];

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

/// What the request is about: the first user message (the goal, by the engine's prompts).
pub fn goal_of(messages: &[Value]) -> String {
    let text = messages
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .or_else(|| messages.last())
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .unwrap_or("the goal");
    text.chars().take(200).collect()
}

/// The generic answer for a purpose.
pub fn reply(purpose: Purpose, milestone: Option<&str>, attempt: u32, goal: &str) -> Value {
    match purpose {
        Purpose::Gate => gate(goal),
        Purpose::Strategic => plan(),
        Purpose::Tactical => match milestone {
            Some(DIRECT) | None if attempt <= 1 => steps("direct.s1", "lookup", lookup(goal)),
            Some(DIRECT) | None => json!({
                "done": true,
                "answer": format!("simulated answer about: {goal}")
            }),
            Some("m2") => steps(
                "m2.s1",
                "write_note",
                json!({"title": "summary", "text": format!("simulated summary of: {goal}")}),
            ),
            Some(other) => steps(&format!("{other}.s1"), "lookup", lookup(goal)),
        },
        Purpose::Verifier => json!({
            "verdict": "pass",
            "reason": "simulated verifier: no real check was made"
        }),
    }
}

fn lookup(goal: &str) -> Value {
    let query = if goal.trim().is_empty() {
        "the goal"
    } else {
        goal
    };
    json!({ "query": query })
}

fn steps(id: &str, tool: &str, args: Value) -> Value {
    json!({"steps": [{"id": id, "tool": tool, "args": args, "expected_output": "a simulated result"}]})
}

fn gate(goal: &str) -> Value {
    let lower = goal.to_lowercase();
    let writes = WRITE_WORDS.iter().any(|word| lower.contains(word));
    json!({
        "est_tool_calls": if writes { 3 } else { 1 },
        "touches_writes": writes,
        "targets": 1,
        "goal_kind": if writes { "change" } else { "lookup" }
    })
}

/// The generic plan: gather with `lookup`, then record with `write_note`.
pub fn plan() -> Value {
    json!({"milestones": [
        {"id": "m1", "title": "Gather what the goal needs", "depends_on": [], "effort": 1,
         "tools": ["lookup"], "outcome": "findings about the goal",
         "accept": {"type": "artifact", "name": "findings", "non_empty": true}},
        {"id": "m2", "title": "Write up the result", "depends_on": ["m1"], "effort": 1,
         "tools": ["write_note"], "outcome": "a note summarising the findings",
         "accept": {"type": "artifact", "name": "note", "non_empty": true}}
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_sees_writes_and_the_direct_loop_ends() {
        assert_eq!(
            reply(Purpose::Gate, None, 1, "Deploy the app")["touches_writes"],
            true
        );
        assert_eq!(
            reply(Purpose::Gate, None, 1, "What time is it?")["touches_writes"],
            false
        );
        let first = reply(Purpose::Tactical, Some(DIRECT), 1, "q");
        assert_eq!(first["steps"][0]["tool"], "lookup");
        let second = reply(Purpose::Tactical, Some(DIRECT), 2, "q");
        assert_eq!(second["done"], true);
        let plan = plan();
        assert_eq!(plan["milestones"].as_array().map(Vec::len), Some(2));
    }
}
