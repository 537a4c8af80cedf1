//! An act loop's history as a conversation: each call the model chose, then what came of it.
//!
//! The reactive baseline and v2's direct route ask the model again after every observation.
//! Sent as one JSON input holding an `observations` list, a small model (Qwen2.5-Coder-1.5B,
//! measured) repeats its last call for ever even when an observation answers the goal; sent as
//! chat turns (its call as its own assistant message, the result as the next user message, the
//! form models are trained on), the same model answers. The stored observations stay as they
//! are (checkpoints, resume); only how a question shows them changes.

use serde_json::{Value, json};

use super::ports::Turn;

/// How the loop's model proposes calls: one at a time, or as a list of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallShape {
    /// `{"tool": NAME, "args": {...}}` (the reactive baseline).
    Single,
    /// `{"steps": [{"id", "tool", "args"}]}` (the direct route).
    Steps,
}

/// The conversation that the stored `observations` (oldest first) stand for.
pub fn of_observations(observations: &[Value], shape: CallShape) -> Vec<Turn> {
    let mut turns = Vec::with_capacity(observations.len() * 2);
    for observation in observations {
        let Some(tool) = observation.get("tool") else {
            // A refused step, an unusable reply, a model error: the engine says so.
            turns.push(Turn::engine(without(observation, "round")));
            continue;
        };
        let step = observation.get("step").cloned().unwrap_or(Value::Null);
        let args = observation
            .get("args")
            .cloned()
            .unwrap_or_else(|| json!({}));
        turns.push(Turn::model(match shape {
            CallShape::Single => json!({"tool": tool, "args": args}),
            CallShape::Steps => json!({"steps": [{"id": step, "tool": tool, "args": args}]}),
        }));
        let ok = observation
            .get("ok")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        turns.push(Turn::engine(if ok {
            json!({"result_of": step, "ok": true, "output": observation.get("output")})
        } else {
            json!({"result_of": step, "ok": false, "error": observation.get("error")})
        }));
    }
    turns
}

fn without(value: &Value, key: &str) -> Value {
    match value {
        Value::Object(map) => {
            let mut map = map.clone();
            map.remove(key);
            Value::Object(map)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::runtime::ports::Speaker;

    #[test]
    fn a_call_becomes_the_models_turn_and_its_result_the_engines() {
        let observations = vec![
            json!({"step": "r1", "tool": "lookup", "args": {"service": "a"}, "ok": true,
                   "error": null, "output": {"owner": "ann"}}),
            json!({"step": "r2", "tool": "lookup", "args": {}, "ok": false,
                   "error": "no such service", "output": null}),
            json!({"round": 3, "unusable_reply": "{}"}),
        ];
        let turns = of_observations(&observations, CallShape::Single);
        let speakers: Vec<Speaker> = turns.iter().map(|t| t.speaker).collect();
        use Speaker::{Engine, Model};
        assert_eq!(speakers, vec![Model, Engine, Model, Engine, Engine]);
        assert_eq!(
            turns[0].content,
            json!({"tool": "lookup", "args": {"service": "a"}})
        );
        assert_eq!(
            turns[1].content,
            json!({"result_of": "r1", "ok": true, "output": {"owner": "ann"}})
        );
        assert_eq!(
            turns[3].content,
            json!({"result_of": "r2", "ok": false, "error": "no such service"})
        );
        assert_eq!(turns[4].content, json!({"unusable_reply": "{}"}));
    }

    #[test]
    fn a_step_list_loop_sees_its_calls_as_step_lists() {
        let observations = vec![
            json!({"step": "s1", "tool": "t", "args": {"x": 1}, "ok": true,
                                       "error": null, "output": "out"}),
        ];
        let turns = of_observations(&observations, CallShape::Steps);
        assert_eq!(
            turns[0].content,
            json!({"steps": [{"id": "s1", "tool": "t", "args": {"x": 1}}]})
        );
    }
}
