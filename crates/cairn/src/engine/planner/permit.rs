//! Least privilege: a goal that asks for no change is offered no tool that changes the world.
//!
//! Measured against the real local model: asked "Which version of the billing service is
//! deployed?", the 1.5B planner chose `deploy` to find the version. Its arguments happened to be
//! wrong; right ones would have deployed something to answer a question. So the plan and the
//! direct route of v2 are offered the side-effecting tools only when the goal's features
//! ([`super::gate::goal_features`]: the gate's, or the heuristic's, which counts any write
//! verb and errs towards writing) say it touches writes. A withheld tool is absent from the
//! schemas the model answers under and unknown to plan validation, so it cannot be planned,
//! proposed or called.

use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::ports::ToolSpec;

/// The tools a goal may use, by name (in the registry's order).
pub(super) async fn permitted(cx: &Attempt) -> Vec<String> {
    let writes = super::gate::goal_features(cx).await.touches_writes;
    names(cx.specs.values(), writes)
}

fn names<'a>(specs: impl Iterator<Item = &'a ToolSpec>, writes: bool) -> Vec<String> {
    specs
        .filter(|spec| writes || !spec.side_effects)
        .map(|spec| spec.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, side_effects: bool) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            schema: serde_json::Value::Null,
            side_effects,
            artifacts: Vec::new(),
        }
    }

    #[test]
    fn a_goal_without_writes_gets_only_readers() {
        let specs = [spec("deploy", true), spec("lookup", false)];
        assert_eq!(names(specs.iter(), false), ["lookup"]);
        assert_eq!(names(specs.iter(), true), ["deploy", "lookup"]);
    }
}
