use serde_json::json;

use super::*;

#[test]
fn committed_events_count_steps_repairs_gate_and_ends() {
    let meters = Meters::new();
    let events = [
        NewEvent::new(kinds::GATE_DECIDED, json!({"route": "plan"})),
        NewEvent::new(kinds::STEP_FINISHED, json!({"ok": true})),
        NewEvent::new(kinds::STEP_FINISHED, json!({"ok": false})),
        NewEvent::new(kinds::REPAIR_STARTED, json!({"level": "retry_step"})),
        NewEvent::new(kinds::TASK_SUCCEEDED, json!({})),
    ];
    meters.committed("auto", &events);
    meters.task_submitted("auto");
    let text = meters.render();
    for line in [
        "cairn_gate_decisions_total{route=\"plan\"} 1",
        "cairn_steps_total{outcome=\"ok\"} 1",
        "cairn_steps_total{outcome=\"error\"} 1",
        "cairn_repairs_total{level=\"retry_step\"} 1",
        "cairn_tasks_finished_total{status=\"succeeded\",strategy=\"auto\"} 1",
        "cairn_tasks_submitted_total{strategy=\"auto\"} 1",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

#[test]
fn model_tokens_split_by_direction_and_streams_are_counted_while_open() {
    let meters = Meters::new();
    meters.model_call(&ModelCallRecord {
        purpose: "tactical",
        model: "m",
        ok: true,
        input_tokens: 30,
        output_tokens: 7,
    });
    let guard = meters.sse_subscriber();
    let text = meters.render();
    assert!(
        text.contains(
            "cairn_model_tokens_total{purpose=\"tactical\",model=\"m\",direction=\"input\"} 30"
        ),
        "{text}"
    );
    assert!(text.contains("direction=\"output\"} 7"), "{text}");
    assert!(text.contains("cairn_sse_subscribers 1"), "{text}");
    drop(guard);
    assert!(meters.render().contains("cairn_sse_subscribers 0"));
}
