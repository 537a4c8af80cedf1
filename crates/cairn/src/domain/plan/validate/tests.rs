//! Unit tests of plan, step-list and replan validation (kept beside `validate.rs` so that file
//! stays readable in one sitting).

use super::*;
use crate::domain::plan::error::feedback;
use crate::domain::plan::{MilestoneStatus, Plan, Step, StepStatus};
use serde_json::{Value, json};

fn tools() -> KnownTools {
    KnownTools::new(["search", "edit_file", "run"])
}

fn milestone(id: &str, deps: &[&str]) -> Value {
    json!({"id": id, "title": format!("do {id}"), "depends_on": deps, "effort": 1,
           "tools": ["search"], "accept": {"type": "artifact", "name": format!("{id}_out")}})
}

fn plan(items: Vec<Value>) -> Plan {
    Plan::from_value(&json!({ "milestones": items }), 10).unwrap()
}

fn errors(p: &Plan) -> Vec<PlanError> {
    validate(p, &tools()).unwrap_err()
}

#[test]
fn the_worked_example_is_valid() {
    let p = plan(vec![
        milestone("m1", &[]),
        milestone("m2", &["m1"]),
        milestone("m3", &["m1"]),
        milestone("m4", &["m1", "m2"]),
    ]);
    assert_eq!(validate(&p, &tools()), Ok(()));
}

#[test]
fn empty_and_oversized_plans_are_refused() {
    assert_eq!(errors(&Plan { milestones: vec![] }), vec![PlanError::Empty]);
    let many = plan((0..21).map(|i| milestone(&format!("m{i}"), &[])).collect());
    assert_eq!(
        errors(&many),
        vec![PlanError::TooManyMilestones { count: 21, max: 20 }]
    );
    let limits = PlanLimits {
        max_milestones: 30,
        ..PlanLimits::default()
    };
    assert_eq!(validate_with(&many, &tools(), &limits), Ok(()));
}

#[test]
fn ids_must_be_unique_and_non_empty() {
    let p = plan(vec![
        milestone("m1", &[]),
        milestone("m1", &[]),
        milestone(" ", &[]),
    ]);
    assert_eq!(
        errors(&p),
        vec![
            PlanError::DuplicateId { id: "m1".into() },
            PlanError::EmptyId { index: 2 }
        ]
    );
}

#[test]
fn dependencies_must_exist_and_not_point_to_self() {
    let p = plan(vec![milestone("m1", &["m1"]), milestone("m2", &["ghost"])]);
    let e = errors(&p);
    assert_eq!(
        e,
        vec![
            PlanError::SelfDependency {
                milestone: "m1".into()
            },
            PlanError::UnknownDependency {
                milestone: "m2".into(),
                dependency: "ghost".into()
            },
        ]
    );
    assert_eq!(
        e[1].to_string(),
        "milestone m2 depends on unknown milestone \"ghost\""
    );
}

#[test]
fn cycles_are_reported_with_their_path() {
    let p = plan(vec![
        milestone("m1", &["m3"]),
        milestone("m2", &["m1"]),
        milestone("m3", &["m2"]),
        milestone("m4", &[]),
    ]);
    let e = errors(&p);
    assert_eq!(
        e,
        vec![PlanError::Cycle {
            path: vec!["m1".into(), "m3".into(), "m2".into(), "m1".into()]
        }]
    );
    assert_eq!(
        e[0].to_string(),
        "dependency cycle m1 -> m3 -> m2 -> m1; remove one of these dependencies"
    );
}

#[test]
fn checks_efforts_and_tools_are_checked() {
    let p = plan(vec![
        json!({"id": "a", "title": "t", "effort": 0, "tools": ["search", "rm_rf"],
               "accept": {"type": "command", "tool": "bash", "exit_code": 0}}),
        json!({"id": "b", "title": "t", "effort": 1, "tools": [],
               "accept": {"type": "all", "checks": []}}),
    ]);
    let e = errors(&p);
    let registered = vec!["edit_file".to_string(), "run".into(), "search".into()];
    assert_eq!(
        e,
        vec![
            PlanError::ZeroEffort {
                milestone: "a".into()
            },
            PlanError::UnknownTool {
                milestone: "a".into(),
                tool: "rm_rf".into(),
                registered: registered.clone()
            },
            PlanError::UnknownCheckTool {
                milestone: "a".into(),
                tool: "bash".into(),
                registered
            },
            PlanError::NoTools {
                milestone: "b".into()
            },
            PlanError::InvalidCheck {
                milestone: "b".into(),
                reason: "\"all\" check needs at least one inner check".into()
            },
        ]
    );
    assert!(
        e[1].to_string()
            .ends_with("registered tools: edit_file, run, search")
    );
}

#[test]
fn errors_and_feedback_are_bounded() {
    let p = plan(
        (0..15)
            .map(|i| milestone(&format!("m{i}"), &["ghost"]))
            .collect(),
    );
    let limits = PlanLimits {
        max_errors: 3,
        ..PlanLimits::default()
    };
    let e = validate_with(&p, &tools(), &limits).unwrap_err();
    assert_eq!(e.len(), 3);
    let all = errors(&p);
    let text = feedback(&all, 2);
    assert_eq!(text.lines().count(), 3);
    assert!(text.starts_with("1. milestone m0 depends on unknown milestone"));
    assert!(text.ends_with("(8 more not shown)"));
    let long = "x".repeat(500);
    let p = plan(vec![milestone("m1", &[long.as_str()])]);
    assert!(errors(&p)[0].to_string().len() < 200);
}

fn step(id: &str, tool: &str) -> Step {
    Step {
        id: id.into(),
        tool: tool.into(),
        args: json!({"path": "a"}),
        expected_output: String::new(),
        status: StepStatus::Pending,
        attempt: 0,
    }
}

#[test]
fn step_lists_stay_within_the_milestone() {
    let p = plan(vec![
        json!({"id": "m2", "title": "Patch A", "effort": 2, "tools": ["edit_file", "run"],
                              "accept": {"type": "command", "tool": "run", "exit_code": 0}}),
    ]);
    let m = &p.milestones[0];
    let limits = PlanLimits::default();
    assert_eq!(
        validate_steps(&[step("s1", "edit_file"), step("s2", "run")], m, &limits),
        Ok(())
    );
    assert_eq!(validate_steps(&[], m, &limits), Err(vec![StepError::Empty]));
    let mut bad_args = step("s3", "run");
    bad_args.args = json!("make test");
    assert_eq!(
        validate_steps(
            &[step("s1", "search"), step("s1", "run"), bad_args],
            m,
            &limits
        ),
        Err(vec![
            StepError::ToolNotAllowed {
                step: "s1".into(),
                tool: "search".into(),
                allowed: vec!["edit_file".into(), "run".into()]
            },
            StepError::DuplicateId { id: "s1".into() },
            StepError::ArgsNotObject { step: "s3".into() },
        ])
    );
    let many: Vec<Step> = (0..21)
        .map(|i| {
            let mut s = step(&format!("s{i}"), "run");
            s.args = json!({"path": format!("f{i}")});
            s
        })
        .collect();
    assert_eq!(
        validate_steps(&many, m, &limits),
        Err(vec![StepError::TooMany { count: 21, max: 20 }])
    );
}

fn finished(mut p: Plan, ids: &[&str]) -> Plan {
    for m in &mut p.milestones {
        if ids.contains(&m.id.as_str()) {
            m.status = MilestoneStatus::Done;
            m.steps = vec![step(&format!("{}.s1", m.id), "search")];
        }
    }
    p
}

#[test]
fn replans_keep_finished_milestones() {
    let old = finished(
        plan(vec![
            milestone("m1", &[]),
            milestone("m2", &["m1"]),
            milestone("m4", &["m1"]),
        ]),
        &["m1", "m2"],
    );
    // The planner replaces m4 by m4b and m5, and claims m5 is already done: it is not.
    let mut new = plan(vec![
        milestone("m1", &[]),
        milestone("m2", &["m1"]),
        milestone("m4b", &["m1"]),
        milestone("m5", &["m4b"]),
    ]);
    new.milestones[3].status = MilestoneStatus::Done;
    let merged = carry_over(&old, &new).unwrap();
    let statuses: Vec<_> = merged.milestones.iter().map(|m| m.status).collect();
    use MilestoneStatus::*;
    assert_eq!(statuses, vec![Done, Done, Pending, Pending]);
    assert_eq!(merged.milestones[0].steps, old.milestones[0].steps);
    assert!(merged.milestones[3].steps.is_empty());
    assert_eq!(
        merged
            .ready()
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        vec!["m4b"]
    );
}

#[test]
fn replans_that_rewrite_finished_work_are_refused_and_left_out_work_is_kept() {
    let old = finished(
        plan(vec![
            milestone("m1", &[]),
            milestone("m2", &["m1"]),
            milestone("m3", &[]),
        ]),
        &["m1", "m2"],
    );
    let mut new = plan(vec![milestone("m2", &["m1"]), milestone("m3", &[])]);
    let kept = carry_over(&old, &new).expect("a left-out finished milestone is put back");
    let ids: Vec<&str> = kept.milestones.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["m1", "m2", "m3"]);
    assert_eq!(kept.milestones[0].status, MilestoneStatus::Done);
    new = plan(vec![
        milestone("m1", &[]),
        milestone("m2", &["m3"]),
        milestone("m3", &[]),
    ]);
    new.milestones[0].title = "Find usages again".into();
    new.milestones[1].accept = crate::domain::plan::check::Check::Verifier {
        prompt: "ok?".into(),
    };
    let e = carry_over(&old, &new).unwrap_err();
    assert_eq!(
        e,
        vec![
            PlanError::RewroteDoneMilestone {
                milestone: "m1".into(),
                field: "title"
            },
            PlanError::RewroteDoneMilestone {
                milestone: "m2".into(),
                field: "accept"
            },
            PlanError::DoneDependsOnUnfinished {
                milestone: "m2".into(),
                dependency: "m3".into()
            },
        ]
    );
    assert_eq!(
        e[0].to_string(),
        "finished milestone m1 changed its title; keep it unchanged in the new plan"
    );
}

#[test]
fn a_check_may_name_only_an_artifact_its_milestones_tools_declare() {
    let declared = || {
        tools().with_artifacts([
            ("search".to_string(), vec!["hits".to_string()]),
            ("edit_file".to_string(), vec!["diff".to_string()]),
        ])
    };
    let checked = |tools: &[&str], name: &str| {
        plan(vec![
            json!({"id": "m1", "title": "t", "depends_on": [], "effort": 1,
            "tools": tools, "accept": {"type": "all", "checks": [
                {"type": "schema", "artifact": name, "schema": {"type": "object"}}]}}),
        ])
    };
    assert_eq!(validate(&checked(&["search"], "hits"), &declared()), Ok(()));
    // Another milestone's tool produces it, not this one's: refused, with what it may name.
    let refused = validate(&checked(&["search"], "diff"), &declared()).unwrap_err();
    assert_eq!(
        refused,
        vec![PlanError::UndeclaredArtifact {
            milestone: "m1".into(),
            artifact: "diff".into(),
            produced: vec!["hits".into()],
        }]
    );
    assert!(refused[0].to_string().contains("they produce: hits"));
    // A granted tool that declares nothing may produce anything: nothing is refused.
    assert_eq!(
        validate(&checked(&["search", "run"], "x"), &declared()),
        Ok(())
    );
    // No tool declares: any name, as before.
    assert_eq!(validate(&checked(&["search"], "x"), &tools()), Ok(()));
}

#[test]
fn a_finished_milestone_is_not_held_to_declarations_made_after_it() {
    let known = tools().with_artifacts([("search".to_string(), vec!["hits".to_string()])]);
    let mut p = plan(vec![milestone("m1", &[])]);
    // m1 is checked by `m1_out`, which `search` does not declare.
    assert!(validate(&p, &known).is_err());
    p.milestones[0].status = MilestoneStatus::Done;
    assert_eq!(validate(&p, &known), Ok(()));
}
