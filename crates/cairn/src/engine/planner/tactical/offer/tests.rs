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

fn writes(tool: &str) -> bool {
    tool == "cancel_order"
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

#[test]
fn a_repeated_repair_owing_a_change_keeps_the_writers_and_drops_the_reads_that_answered() {
    let mut specs = registry();
    specs.push(spec("refund_order", "Refund an order by its id.", true));
    specs.push(spec(
        "list_orders",
        "A customer's orders, newest first.",
        false,
    ));
    let refund: Milestone = serde_json::from_value(json!({
        "id": "m3", "title": "Latest order refunded", "effort": 1,
        "tools": ["cancel_order", "list_orders"], "accept": {"type": "steps_succeeded"}}))
    .expect("milestone");
    let goal = "Find the latest order of customer C-1042, refund it and report the refund id.";
    let record = [
        json!({"tool": "cancel_order", "ok": false}),
        json!({"tool": "list_orders", "ok": true}),
    ];
    let writer = |t: &str| t == "cancel_order" || t == "refund_order";
    let repair = offer(specs.iter(), &refund, &record, Ask::RetryStep, goal);
    assert!(
        repair.tools.contains(&"list_orders".to_string()),
        "{repair:?}"
    );
    let again = narrowed(repair, &record, Ask::RetryStep, true, &writer);
    assert_eq!(again.tools, ["refund_order"], "{again:?}");
}

#[test]
fn a_repeated_repair_is_asked_again_without_the_tools_that_failed_here() {
    let specs = registry();
    let failed = [json!({"tool": "get_customer", "ok": false})];
    let repair = offer(specs.iter(), &milestone(), &failed, Ask::RetryStep, GOAL);
    let first = narrowed(repair.clone(), &failed, Ask::RetryStep, false, &writes);
    assert!(first.narrowable, "{first:?}");
    assert_eq!(
        first.tools,
        ["get_customer", "get_order"],
        "nothing is taken out yet"
    );
    let again = narrowed(repair, &failed, Ask::RetryStep, true, &writes);
    assert_eq!(again.tools, ["get_order"]);
    assert_eq!(again.failing, ["get_customer"]);
    assert!(!again.narrowable, "once only");
    // A first list, or a repair whose only tool failed, is never narrowed.
    let initial = offer(specs.iter(), &milestone(), &failed, Ask::Initial, GOAL);
    assert!(!narrowed(initial, &failed, Ask::Initial, false, &writes).narrowable);
    let only: Vec<ToolSpec> = vec![spec("get_customer", "A customer's profile.", false)];
    let alone = offer(only.iter(), &milestone(), &failed, Ask::RetryStep, GOAL);
    assert!(!narrowed(alone, &failed, Ask::RetryStep, false, &writes).narrowable);
}

#[test]
fn a_tool_the_failed_answer_names_is_offered_first() {
    let mut specs = registry();
    specs.push(spec("locate", "Where a file is.", false));
    let failed = [json!({"tool": "get_customer", "ok": false,
                         "error": "no such customer here; to recover: call locate"})];
    let repair = offer(specs.iter(), &milestone(), &failed, Ask::RetryStep, GOAL);
    assert_eq!(
        repair.extra.first().map(String::as_str),
        Some("locate"),
        "{repair:?}"
    );
    // Named or not, a writer the goal does not ask for is still not offered.
    let failed = [json!({"tool": "get_customer", "ok": false,
                         "error": "call cancel_order first"})];
    let repair = offer(specs.iter(), &milestone(), &failed, Ask::RetryStep, GOAL);
    assert!(
        !repair.tools.contains(&"cancel_order".to_string()),
        "{repair:?}"
    );
}
