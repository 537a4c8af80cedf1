use serde_json::json;

use super::*;

fn spec(name: &str, description: &str, side_effects: bool) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        schema: Value::Null,
        side_effects,
        artifacts: Vec::new(),
    }
}

fn registry() -> Vec<ToolSpec> {
    vec![
        spec(
            "get_customer",
            "A customer's profile by customer id.",
            false,
        ),
        spec(
            "get_order",
            "An order by its id: status and tracking number.",
            false,
        ),
        spec("cancel_order", "Cancel an order.", true),
        spec("list_tickets", "Open support tickets.", false),
    ]
}

fn milestone() -> Milestone {
    serde_json::from_value(
        json!({"id": "m1", "title": "Tracking number found", "effort": 1,
        "tools": ["get_customer"], "outcome": "the order's tracking number",
        "accept": {"type": "steps_succeeded"}}),
    )
    .expect("milestone")
}

const GOAL: &str = "What is the tracking number of order ord-4k2p9?";

#[test]
fn a_first_list_gets_the_grant_alone() {
    let specs = registry();
    let offered = offer(specs.iter(), &milestone(), &[], Ask::Initial, GOAL);
    assert_eq!(offered.tools, ["get_customer"]);
    assert!(offered.extra.is_empty());
}

#[test]
fn a_repair_is_offered_relevant_readers_beside_its_grant() {
    let specs = registry();
    let failed = [json!({"tool": "get_customer", "ok": false})];
    for ask in [Ask::RetryStep, Ask::ReplanMilestone] {
        let repair = offer(specs.iter(), &milestone(), &failed, ask, GOAL);
        // A reader about orders; never a writer (cancel_order), never an unrelated reader.
        assert_eq!(repair.tools, ["get_customer", "get_order"]);
        assert_eq!(repair.extra, ["get_order"]);
    }
}

#[test]
fn a_reader_that_already_failed_here_is_not_offered_again() {
    let specs = registry();
    let failed = [json!({"tool": "get_order", "ok": false})];
    let repair = offer(specs.iter(), &milestone(), &failed, Ask::RetryStep, GOAL);
    assert_eq!(repair.tools, ["get_customer"]);
    assert!(repair.extra.is_empty());
}

#[test]
fn a_writer_is_offered_beyond_the_grant_only_when_the_goal_names_its_action() {
    let mut specs = registry();
    specs.push(spec("refund_order", "Refund an order by its id.", true));
    let failed = [json!({"tool": "cancel_order", "ok": false})];
    let refund: Milestone = serde_json::from_value(json!({
        "id": "m2", "title": "Order refunded", "effort": 1, "tools": ["cancel_order"],
        "accept": {"type": "steps_succeeded"}}))
    .expect("milestone");
    let goal = "Find the latest order of customer C-1042, refund it and report the refund id.";
    let repair = offer(specs.iter(), &refund, &failed, Ask::RetryStep, goal);
    assert!(
        repair.extra.contains(&"refund_order".to_string()),
        "{repair:?}"
    );
    // The tracking question names no action: no writer, the grant's or another.
    let failed = [json!({"tool": "get_customer", "ok": false})];
    let question = offer(
        specs.iter(),
        &milestone(),
        &failed,
        Ask::ReplanMilestone,
        GOAL,
    );
    assert!(
        !question.tools.contains(&"refund_order".to_string()),
        "{question:?}"
    );
    assert!(
        !question.tools.contains(&"cancel_order".to_string()),
        "{question:?}"
    );
}
