//! Step lists as a small model writes them: calls repeated for nothing are cut before the
//! list is validated and attached.

use super::plan::Step;

/// The list without the steps that repeat an earlier identical call (tool and arguments) with
/// only calls of that same tool between them: nothing ran that could change its answer, so the
/// second call could only cost. Returns the ids dropped. (The real 1.5B model wrote twelve
/// lookups of three services for "find the owner of B"; refusing such a list made it re-ask
/// and fail, so the list is cut instead.) "Test, edit, test again" keeps both tests: the edit
/// ran between them.
pub fn drop_repeated_calls(steps: Vec<Step>) -> (Vec<Step>, Vec<String>) {
    let mut kept: Vec<Step> = Vec::with_capacity(steps.len());
    let mut dropped = Vec::new();
    for step in steps {
        let repeats = kept
            .iter()
            .rev()
            .take_while(|s| s.tool == step.tool)
            .any(|s| s.args == step.args);
        if repeats {
            dropped.push(step.id);
        } else {
            kept.push(step);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::StepStatus;
    use serde_json::json;

    fn step(id: &str, tool: &str) -> Step {
        Step {
            id: id.into(),
            tool: tool.into(),
            args: json!({}),
            expected_output: String::new(),
            status: StepStatus::Pending,
            attempt: 0,
        }
    }

    #[test]
    fn a_call_repeated_with_nothing_between_to_change_its_answer_is_dropped() {
        let call = |id: &str, tool: &str, arg: &str| {
            let mut s = step(id, tool);
            s.args = json!({"service": arg});
            s
        };
        // Lookups of B, A, B: the second B lookup repeats the first.
        let (kept, dropped) = drop_repeated_calls(vec![
            call("s1", "lookup", "B"),
            call("s2", "lookup", "A"),
            call("s3", "lookup", "B"),
            call("s4", "write_note", "B"),
        ]);
        let ids: Vec<&str> = kept.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            (ids, dropped),
            (vec!["s1", "s2", "s4"], vec!["s3".to_string()])
        );
        // Test, edit, test again: the edit ran between them.
        let (kept, dropped) = drop_repeated_calls(vec![
            call("s1", "run", "make test"),
            call("s2", "edit_file", "a.py"),
            call("s3", "run", "make test"),
        ]);
        assert_eq!((kept.len(), dropped.len()), (3, 0));
    }
}
