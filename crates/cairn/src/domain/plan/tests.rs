use super::*;
use serde_json::json;

pub(crate) fn worked_example() -> Value {
    json!({"milestones": [
        {"id": "m1", "title": "Find every usage of db.url", "depends_on": [], "effort": 1,
         "tools": ["search"], "outcome": "list of files that read db.url",
         "accept": {"type": "artifact", "name": "usage_list", "non_empty": true}},
        {"id": "m2", "title": "Patch service A", "depends_on": ["m1"], "effort": 2,
         "tools": ["edit_file", "run"],
         "accept": {"type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": "a"}, "exit_code": 0}},
        {"id": "m3", "title": "Patch service B", "depends_on": ["m1"], "effort": 2,
         "tools": ["edit_file", "run"],
         "accept": {"type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": "b"}, "exit_code": 0}},
        {"id": "m4", "title": "Patch service C", "depends_on": ["m1"], "effort": 2,
         "tools": ["edit_file", "run"],
         "accept": {"type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": "c"}, "exit_code": 0}}
    ]})
}

#[test]
fn parses_the_shared_shape_and_round_trips() {
    let plan = Plan::from_value(&worked_example(), 10).unwrap();
    assert_eq!(plan.milestones.len(), 4);
    assert_eq!(plan.milestones[0].status, MilestoneStatus::Pending);
    assert_eq!(plan.milestones[1].depends_on, vec!["m1"]);
    let back = serde_json::to_value(&plan).unwrap();
    // Defaults are written out; the given fields survive unchanged.
    assert_eq!(
        back["milestones"][1]["accept"],
        worked_example()["milestones"][1]["accept"]
    );
    assert_eq!(back["milestones"][0]["status"], "pending");
    assert!(back["milestones"][0].get("steps").is_none());
    assert_eq!(Plan::from_value(&back, 10).unwrap(), plan);
}

#[test]
fn missing_check_and_effort_are_named_per_milestone() {
    let value = json!({"milestones": [
        {"id": "a", "title": "t", "effort": 1},
        {"id": "b", "title": "t", "accept": {"type": "verifier", "prompt": "ok?"}},
        {"title": "no id", "effort": "two", "accept": {"type": "verifier", "prompt": "p"}}
    ]});
    let errors = Plan::from_value(&value, 10).unwrap_err();
    assert_eq!(
        errors[0],
        PlanError::MissingCheck {
            milestone: "a".into()
        }
    );
    assert_eq!(
        errors[1],
        PlanError::MissingEffort {
            milestone: "b".into()
        }
    );
    assert!(matches!(&errors[2], PlanError::Malformed { at, .. } if at == "milestones[2]"));
    assert!(errors[2].to_string().contains("milestones[2]"));
    assert!(Plan::from_value(&json!({"steps": []}), 10).is_err());
    assert_eq!(Plan::from_value(&value, 1).unwrap_err().len(), 1);
}

#[test]
fn ready_follows_dependencies_and_status() {
    let mut plan = Plan::from_value(&worked_example(), 10).unwrap();
    let ids = |plan: &Plan| {
        plan.ready()
            .iter()
            .map(|m| m.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&plan), vec!["m1"]);
    plan.milestone_mut("m1").unwrap().status = MilestoneStatus::Active;
    assert!(ids(&plan).is_empty());
    plan.milestone_mut("m1").unwrap().status = MilestoneStatus::Done;
    assert_eq!(ids(&plan), vec!["m2", "m3", "m4"]);
    assert!(!plan.all_done());
    for m in &mut plan.milestones {
        m.status = MilestoneStatus::Done;
    }
    assert!(plan.all_done());
    assert!(ids(&plan).is_empty());
}

#[test]
fn topological_order_is_stable_and_refuses_cycles() {
    let mut plan = Plan::from_value(&worked_example(), 10).unwrap();
    // Put m1 last in the list: the order still starts with it.
    plan.milestones.rotate_left(1);
    assert_eq!(
        plan.topological_order().unwrap(),
        vec!["m1", "m2", "m3", "m4"]
    );
    plan.milestone_mut("m1").unwrap().depends_on = vec!["m4".into()];
    assert!(plan.topological_order().is_none());
    plan.milestone_mut("m1").unwrap().depends_on = vec!["nope".into()];
    assert!(plan.topological_order().is_none());
}

#[test]
fn missing_tools_make_unfinished_milestones_stale() {
    let mut plan = Plan::from_value(&worked_example(), 10).unwrap();
    let all = KnownTools::new(["search", "edit_file", "run"]);
    assert!(plan.missing_tools(&all).is_empty());
    let no_runner = KnownTools::new(["search", "edit_file"]);
    plan.milestone_mut("m2").unwrap().status = MilestoneStatus::Done;
    assert_eq!(
        plan.missing_tools(&no_runner),
        vec![
            ("m3".to_string(), vec!["run".to_string()]),
            ("m4".to_string(), vec!["run".to_string()])
        ]
    );
}

#[test]
fn steps_parse_with_defaults() {
    let list: StepList = serde_json::from_value(json!({"steps": [
        {"id": "m2.s1", "tool": "edit_file",
         "args": {"path": "a/config.py", "find": "db.url", "replace": "db.dsn"},
         "expected_output": "file patched"},
        {"id": "m2.s2", "tool": "run"}
    ]}))
    .unwrap();
    assert_eq!(list.steps[0].status, StepStatus::Pending);
    assert_eq!(list.steps[0].attempt, 0);
    assert_eq!(list.steps[1].args, json!({}));
}
