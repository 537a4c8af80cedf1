use serde_json::json;

use super::*;

fn plan(value: Value) -> Plan {
    Plan::from_value(&value, 8).expect("plan")
}

fn milestone(id: &str, tools: &[&str], deps: &[&str], accept: Value) -> Value {
    json!({"id": id, "title": format!("do {id}"), "depends_on": deps, "effort": 1,
           "tools": tools, "accept": accept})
}

fn known() -> KnownTools {
    // `get_user` declares nothing; `create_account` declares `account`.
    KnownTools::new(["get_user", "create_account", "write_note"])
        .with_artifacts([("create_account".to_string(), vec!["account".to_string()])])
}

#[test]
fn a_check_naming_what_no_granted_tool_declares_becomes_steps_succeeded() {
    let mut p = plan(json!({"milestones": [
        milestone("m1", &["get_user"], &[], json!({"type": "artifact", "name": "user_id"})),
    ]}));
    let amendments = amend(&mut p, &known(), &BTreeSet::new());
    assert_eq!(p.milestones[0].accept, Check::StepsSucceeded);
    assert_eq!(
        amendments,
        vec![Amendment::CheckBacked {
            milestone: "m1".into(),
            replaced: Check::Artifact {
                name: "user_id".into(),
                non_empty: true
            },
        }]
    );
}

#[test]
fn declared_artifacts_and_other_leaves_are_kept() {
    let accept = json!({"type": "all", "checks": [
        {"type": "artifact", "name": "account"},
        {"type": "schema", "artifact": "user", "schema": {"type": "object"}},
        {"type": "artifact", "name": "user_id"},
        {"type": "verifier", "prompt": "the user exists"}]});
    let mut p = plan(json!({"milestones": [
        milestone("m1", &["get_user", "create_account"], &[], accept),
    ]}));
    let amendments = amend(&mut p, &known(), &BTreeSet::new());
    assert_eq!(amendments.len(), 2, "{amendments:?}");
    let Check::All { checks } = &p.milestones[0].accept else {
        panic!("still an all: {:?}", p.milestones[0].accept);
    };
    assert_eq!(checks.len(), 3, "steps_succeeded once: {checks:?}");
    assert!(matches!(&checks[0], Check::Artifact { name, .. } if name == "account"));
    assert_eq!(checks[1], Check::StepsSucceeded);
    assert!(matches!(checks[2], Check::Verifier { .. }));
}

#[test]
fn fully_declared_tools_keep_their_check_for_validation_to_judge() {
    let mut p = plan(json!({"milestones": [
        milestone("m1", &["create_account"], &[], json!({"type": "artifact", "name": "user_id"})),
    ]}));
    assert!(amend(&mut p, &known(), &BTreeSet::new()).is_empty());
    assert!(matches!(&p.milestones[0].accept, Check::Artifact { name, .. } if name == "user_id"));
}

#[test]
fn a_toolless_milestone_is_folded_into_its_dependents() {
    let check = json!({"type": "artifact", "name": "account"});
    let mut p = plan(json!({"milestones": [
        milestone("m1", &["create_account"], &[], check.clone()),
        milestone("m2", &[], &["m1"], json!({"type": "verifier", "prompt": "a summary"})),
        milestone("m3", &[], &["m2"], json!({"type": "verifier", "prompt": "formatted"})),
        milestone("m4", &["create_account"], &["m3"], check),
    ]}));
    let amendments = amend(&mut p, &known(), &BTreeSet::new());
    let ids: Vec<&str> = p.milestones.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["m1", "m4"]);
    assert_eq!(p.milestones[1].depends_on, ["m1"]);
    assert_eq!(amendments.len(), 2);
    assert!(matches!(&amendments[0], Amendment::Folded { milestone, .. } if milestone == "m2"));
}

#[test]
fn a_plan_of_toolless_milestones_only_is_left_for_validation() {
    let mut p = plan(json!({"milestones": [
        milestone("m1", &[], &[], json!({"type": "verifier", "prompt": "answered"})),
    ]}));
    assert!(amend(&mut p, &known(), &BTreeSet::new()).is_empty());
    assert_eq!(p.milestones.len(), 1);
}

fn step(id: &str, status: &str) -> Step {
    serde_json::from_value(json!({"id": id, "tool": "get_user", "args": {}, "status": status}))
        .expect("step")
}

#[test]
fn steps_succeeded_needs_no_failure_and_some_output() {
    let out = |id: &str, output: Value| json!({"step": id, "ok": true, "output": output});
    let steps = [step("s1", "done"), step("s2", "pending")];
    assert_eq!(
        steps_succeeded(&steps, &[out("s1", json!({"id": "u-1"}))], &[]),
        Ok(())
    );
    assert!(steps_succeeded(&steps, &[out("s1", json!({}))], &[]).is_err());
    assert!(steps_succeeded(&[step("s1", "pending")], &[], &[]).is_err());
    let failed = [step("s1", "done"), step("s2", "failed")];
    let err = steps_succeeded(&failed, &[out("s1", json!("u-1"))], &[]).unwrap_err();
    assert!(err.contains("s2"), "{err}");
    let with_artifacts = json!({"step": "s1", "ok": true, "output": {}, "artifacts": {"a": 1}});
    assert_eq!(steps_succeeded(&steps, &[with_artifacts], &[]), Ok(()));
}

#[test]
fn milestones_a_replan_must_keep_are_amended_alike_but_not_listed() {
    let mut p = plan(json!({"milestones": [
        milestone("m1", &["get_user"], &[], json!({"type": "artifact", "name": "user_id"})),
        milestone("m2", &["get_user"], &["m1"], json!({"type": "artifact", "name": "login"})),
    ]}));
    let finished = BTreeSet::from(["m1".to_string()]);
    let amendments = amend(&mut p, &known(), &finished);
    assert_eq!(p.milestones[0].accept, Check::StepsSucceeded);
    assert_eq!(amendments.len(), 1, "{amendments:?}");
    assert!(
        matches!(&amendments[0], Amendment::CheckBacked { milestone, .. } if milestone == "m2")
    );
}

#[test]
fn an_answer_reporting_trouble_in_its_body_is_not_a_success() {
    let steps = [step("s1", "done")];
    let said = |output: Value| {
        steps_succeeded(
            &steps,
            &[json!({"step": "s1", "ok": true, "output": output})],
            &[],
        )
    };
    let moved = said(json!({"status": "moved", "remedy": "call again with api = \"v2\""}));
    let moved = moved.unwrap_err();
    assert!(
        moved.contains("status: moved") && moved.contains("remedy"),
        "{moved}"
    );
    assert!(said(json!({"items": [1], "complete": false, "next_page": "2"})).is_err());
    assert!(said(json!({"ok": true, "valid": false})).is_err());
    assert!(said(json!({"ok": false})).is_err());
    assert_eq!(
        said(json!({"status": "deployed", "ok": true, "complete": true})),
        Ok(())
    );
    assert_eq!(said(json!("an error was fixed")), Ok(()));
    // The latest answer of a step counts: a repair's `s1` that fixed it.
    let fixed = [
        json!({"step": "s1", "ok": true, "output": {"status": "moved"}}),
        json!({"step": "s1", "ok": true, "output": {"status": "ok", "id": "u-1"}}),
    ];
    assert_eq!(steps_succeeded(&steps, &fixed, &[]), Ok(()));
}

#[test]
fn a_milestone_that_set_out_to_change_is_not_done_by_reads_alone() {
    let steps = [step("s1", "done")];
    let read = [json!({"step": "s1", "tool": "list_orders", "ok": true,
                       "output": {"orders": ["ord-7m3q1"]}})];
    let err = steps_succeeded(&steps, &read, &["refund_order"]).unwrap_err();
    assert!(
        err.contains("no change was made") && err.contains("refund_order"),
        "{err}"
    );
    let wrote = [json!({"step": "s1", "tool": "refund_order", "ok": true,
                        "output": {"refund": "rf-55120k"}})];
    assert_eq!(steps_succeeded(&steps, &wrote, &["refund_order"]), Ok(()));
}

#[test]
fn a_write_whose_outcome_is_unknown_counts_once_a_read_after_it_succeeded() {
    let steps = [step("s1r", "done")];
    let lost = json!({"step": "s1", "tool": "create_entities", "ok": false,
                      "error": "answer lost", OUTCOME_UNKNOWN: true});
    let read = json!({"step": "s1r", "tool": "open_nodes", "ok": true,
                      "output": {"entities": [{"name": "sum-fact"}]}});
    let writers = ["create_entities"];
    assert_eq!(
        steps_succeeded(&steps, &[lost.clone(), read.clone()], &writers),
        Ok(())
    );
    // A read before the lost write, or a plain failed write, is not enough.
    assert!(steps_succeeded(&steps, &[read.clone(), lost], &writers).is_err());
    let failed = json!({"step": "s1", "tool": "create_entities", "ok": false, "error": "no"});
    assert!(steps_succeeded(&steps, &[failed, read], &writers).is_err());
}

#[test]
fn a_tool_named_as_a_dependency_becomes_a_tool_of_the_milestone() {
    let mut p = plan(json!({"milestones": [
        milestone("m1", &[], &["get_user"], json!({"type": "steps_succeeded"})),
        milestone("m2", &["get_user"], &["m1", "nothing_known"], json!({"type": "steps_succeeded"})),
    ]}));
    let amendments = amend(&mut p, &known(), &BTreeSet::new());
    assert_eq!(p.milestones[0].tools, vec!["get_user".to_string()]);
    assert!(p.milestones[0].depends_on.is_empty());
    assert_eq!(
        p.milestones[1].depends_on,
        vec!["m1".to_string(), "nothing_known".to_string()],
        "a milestone id, and a name that is neither, stay"
    );
    assert_eq!(
        amendments,
        vec![Amendment::DependencyTool {
            milestone: "m1".into(),
            tool: "get_user".into()
        }],
        "not folded: it has a tool now"
    );
}
