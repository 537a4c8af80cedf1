//! The generic mode's answers, read from the request.

use super::*;

fn ask<'a>(
    purpose: Purpose,
    milestone: Option<&'a str>,
    goal: &'a str,
    offered: &'a [String],
) -> Asked<'a> {
    Asked {
        purpose,
        milestone,
        attempt: 1,
        goal,
        offered,
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| n.to_string()).collect()
}

#[test]
fn the_gate_sees_writes_and_targets_and_the_direct_loop_ends() {
    let gate = reply(&ask(
        Purpose::Gate,
        None,
        "Deploy the app to hosts A and B",
        &[],
    ));
    assert_eq!(gate["touches_writes"], true);
    assert_eq!(gate["targets"], 2);
    let gate = reply(&ask(Purpose::Gate, None, "What time is it?", &[]));
    assert_eq!(gate["touches_writes"], false);
    let first = reply(&ask(Purpose::Tactical, Some(DIRECT), "q", &[]));
    assert_eq!(first["steps"][0]["tool"], "lookup");
    let second = reply(&Asked {
        attempt: 2,
        ..ask(Purpose::Tactical, Some(DIRECT), "q", &[])
    });
    assert_eq!(second["done"], true);
    assert_eq!(plan()["milestones"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_plan_names_only_the_tools_offered() {
    let read_only = names(&["lookup"]);
    let plan = reply(&ask(
        Purpose::Strategic,
        None,
        "Look up who owns service A",
        &read_only,
    ));
    assert_eq!(
        plan["milestones"].as_array().map(Vec::len),
        Some(1),
        "{plan}"
    );
    assert_eq!(plan["milestones"][0]["tools"], json!(["lookup"]));
    let both = names(&["lookup", "write_note"]);
    let plan = reply(&ask(
        Purpose::Strategic,
        None,
        "Rename x in services A and B",
        &both,
    ));
    assert_eq!(plan["milestones"][1]["tools"], json!(["write_note"]));
    assert_eq!(plan["milestones"][1]["depends_on"], json!(["m1"]));
    let write_only = names(&["write_note"]);
    let plan = reply(&ask(Purpose::Strategic, None, "Write a note", &write_only));
    assert_eq!(plan["milestones"][0]["id"], "m1");
    assert_eq!(plan["milestones"][0]["depends_on"], json!([]));
}

#[test]
fn steps_act_on_every_target_the_goal_names() {
    let goal = "Rename config key db.url to db.dsn in services A, B and C";
    let granted = names(&["lookup"]);
    let found = reply(&ask(Purpose::Tactical, Some("m1"), goal, &granted));
    let queries: Vec<&Value> = found["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| &s["args"]["query"])
        .collect();
    assert_eq!(queries, [&json!("A"), &json!("B"), &json!("C")]);
    let granted = names(&["write_note"]);
    let written = reply(&ask(Purpose::Tactical, Some("m2"), goal, &granted));
    assert_eq!(written["steps"][2]["args"]["title"], "C");
    assert_eq!(written["steps"][2]["id"], "m2.s3");
    let none = reply(&ask(
        Purpose::Tactical,
        Some("m1"),
        "Summarise the week",
        &[],
    ));
    assert_eq!(none["steps"][0]["args"]["query"], "Summarise the week");
}

#[test]
fn the_goal_and_the_offered_tools_are_read_from_the_request() {
    let messages = vec![
        json!({"role": "system", "content": "plan"}),
        json!({"role": "user", "content": "{\"goal\":\"Restart service A\",\"tools\":[]}"}),
    ];
    assert_eq!(goal_of(&messages), "Restart service A");
    assert_eq!(
        goal_of(&[json!({"role": "user", "content": "plain words"})]),
        "plain words"
    );
    let request = json!({"response_format": {"json_schema": {"schema": {
    "properties": {"steps": {"items": {"oneOf": [
        {"properties": {"tool": {"const": "lookup"}}},
        {"properties": {"tool": {"const": "write_note"}}}
    ]}}}}}}});
    assert_eq!(offered_tools(&request), names(&["lookup", "write_note"]));
    let plan = json!({"response_format": {"json_schema": {"schema": {"properties": {
        "milestones": {"items": {"properties": {"tools": {"items": {"enum": ["lookup"]}}}}}}}}}});
    assert_eq!(offered_tools(&plan), names(&["lookup"]));
    assert!(offered_tools(&json!({"messages": []})).is_empty());
}
