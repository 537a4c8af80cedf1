//! Fingerprints: a stable identity for "what a repair proposal would do".
//!
//! Repair loops oscillate when a planner re-proposes a step list it already tried. A fingerprint
//! hashes only what the executor would actually do (each step's tool and arguments, in order),
//! normalized so that cosmetic differences (step ids, expected-output prose, key order, JSON
//! formatting, `1.0` versus `1`) do not make two equivalent proposals look new. The repair ladder
//! escalates when it sees a fingerprint it has already tried.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::{MilestoneStatus, Plan, Step};

/// A lowercase hex SHA-256 of a normalized proposal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
pub struct Fingerprint(pub String);

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The fingerprint of a step list: tool (trimmed) and canonical args of each step, in order.
pub fn of_steps(steps: &[Step]) -> Fingerprint {
    let mut text = String::from("steps:");
    for step in steps {
        text.push_str(&canonical_json(&Value::String(
            step.tool.trim().to_string(),
        )));
        text.push(':');
        text.push_str(&canonical_json(&step.args));
        text.push(';');
    }
    hash(&text)
}

/// The fingerprint of a strategic plan (for L3 proposals): each milestone's id, dependencies
/// (sorted), effort, tools (sorted), check and whether it is done, in plan order. Titles and
/// prose are left out. The done flags make a plan a proposal from a starting point: the same
/// milestones again after more of them passed is a new situation, not a repeat.
pub fn of_plan(plan: &Plan) -> Fingerprint {
    let mut text = String::from("plan:");
    for m in &plan.milestones {
        let mut deps = m.depends_on.clone();
        deps.sort();
        let mut tools = m.tools.clone();
        tools.sort();
        let accept = serde_json::to_value(&m.accept).unwrap_or(Value::Null);
        let done = m.status == MilestoneStatus::Done;
        let item = serde_json::json!([m.id.trim(), deps, m.effort, tools, accept, done]);
        text.push_str(&canonical_json(&item));
        text.push(';');
    }
    hash(&text)
}

fn hash(text: &str) -> Fingerprint {
    let digest = Sha256::digest(text.as_bytes());
    Fingerprint(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compact JSON with object keys sorted at every level and integral floats written as integers.
/// (serde_json may preserve insertion order in this build, so keys are sorted by hand.)
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Number(n) => match n.as_f64() {
            // 2.0 and 2 are the same argument to a tool.
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                out.push_str(&format!("{}", f as i64))
            }
            _ => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::{StepList, StepStatus};
    use serde_json::json;

    fn steps(value: &str) -> Vec<Step> {
        serde_json::from_str::<StepList>(value).unwrap().steps
    }

    #[test]
    fn equivalent_proposals_share_a_fingerprint() {
        let a = steps(
            r#"{"steps": [
            {"id": "m4.s1", "tool": "edit_file", "args": {"path": "c/config.py", "find": "db.url", "replace": "db.dsn"}, "expected_output": "patched"},
            {"id": "m4.s2", "tool": "run", "args": {"cmd": "make test", "opts": {"b": 1, "a": 2.0}}}]}"#,
        );
        let b = steps(
            r#"{"steps":[{"id":"x","tool":" edit_file ","args":{"replace":"db.dsn","path":"c/config.py","find":"db.url"}},
            {"id":"y","tool":"run","status":"failed","attempt":2,"args":{"opts":{"a":2,"b":1},"cmd":"make test"}}]}"#,
        );
        assert_eq!(b[1].status, StepStatus::Failed);
        assert_eq!(of_steps(&a), of_steps(&b));
        assert_eq!(of_steps(&a).0.len(), 64);
    }

    #[test]
    fn different_work_gets_a_different_fingerprint() {
        let base = steps(
            r#"{"steps": [{"id": "s1", "tool": "run", "args": {"cmd": "make test"}},
                                         {"id": "s2", "tool": "edit_file", "args": {"path": "a"}}]}"#,
        );
        let mut reordered = base.clone();
        reordered.reverse();
        let mut other_args = base.clone();
        other_args[0].args = json!({"cmd": "make  test"});
        let mut other_tool = base.clone();
        other_tool[0].tool = "sh".into();
        let fewer = base[..1].to_vec();
        let all = [
            of_steps(&base),
            of_steps(&reordered),
            of_steps(&other_args),
            of_steps(&other_tool),
            of_steps(&fewer),
            of_steps(&[]),
        ];
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn canonical_json_sorts_keys_everywhere() {
        let v: Value =
            serde_json::from_str(r#"{ "b": [ {"d": 1, "c": 1.5} ], "a": "x y" }"#).unwrap();
        assert_eq!(canonical_json(&v), r#"{"a":"x y","b":[{"c":1.5,"d":1}]}"#);
    }

    #[test]
    fn plan_fingerprints_ignore_prose_but_not_structure() {
        let p = |title: &str, deps: serde_json::Value| {
            Plan::from_value(&json!({"milestones": [
                {"id": "m1", "title": "find", "effort": 1, "tools": ["search"], "accept": {"type": "artifact", "name": "u"}},
                {"id": "m2", "title": title, "depends_on": deps, "effort": 2, "tools": ["run", "edit_file"],
                 "accept": {"type": "command", "tool": "run", "exit_code": 0}}]}), 10).unwrap()
        };
        assert_eq!(
            of_plan(&p("Patch A", json!(["m1"]))),
            of_plan(&p("Patch service A", json!(["m1"])))
        );
        assert_ne!(
            of_plan(&p("Patch A", json!(["m1"]))),
            of_plan(&p("Patch A", json!([])))
        );
        let mut progressed = p("Patch A", json!(["m1"]));
        progressed.milestones[0].status = MilestoneStatus::Done;
        assert_ne!(of_plan(&progressed), of_plan(&p("Patch A", json!(["m1"]))));
    }
}
