//! What a followed task looks like in words: one line per event (the plain output that
//! scripts and tests read), the milestones of the plan with their statuses, the ledger per
//! unit, and the final result.

use std::io::Write;

use cairn::domain::event::kinds;
use serde_json::Value;

use super::api::WireEvent;

/// Writes one line to stdout. A closed pipe (`| head`) is not an error worth a message.
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// One milestone of the plan as the client knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MilestoneRow {
    pub id: String,
    pub title: String,
    pub depends_on: Vec<String>,
    pub status: String,
}

/// One unit's books: spent, allocated to milestones (grants included), the reserve left.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitRow {
    pub unit: String,
    /// Everything charged: the milestones' spend and the planning overhead.
    pub spent: u64,
    /// The planning overhead (gate, plans, verifier) within `spent`.
    pub overhead: u64,
    /// What the milestones hold now: their allocations (less what they returned) and grants.
    pub allocated: u64,
    pub reserve: u64,
}

/// The milestones of a plan version (`GET /v1/tasks/{id}/plans/{version}`).
pub fn milestones_of(plan_version: &Value) -> Vec<MilestoneRow> {
    let items = plan_version
        .pointer("/plan/milestones")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .map(|m| MilestoneRow {
            id: text(m, "id"),
            title: text(m, "title"),
            depends_on: m
                .get("depends_on")
                .and_then(Value::as_array)
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            status: m
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("pending")
                .to_string(),
        })
        .collect()
}

/// The books per unit of a ledger (`GET /v1/tasks/{id}/ledger`).
pub fn units_of(ledger: &Value) -> Vec<UnitRow> {
    let Some(units) = ledger.get("units").and_then(Value::as_object) else {
        return Vec::new();
    };
    units
        .iter()
        .map(|(unit, books)| {
            let figure = |name: &str| books.get(name).and_then(Value::as_u64).unwrap_or(0);
            let allocated: u64 = books
                .get("milestones")
                .and_then(Value::as_object)
                .map(|ms| {
                    ms.values()
                        .map(|m| {
                            let of = |n: &str| m.get(n).and_then(Value::as_u64).unwrap_or(0);
                            of("allocated") + of("granted")
                        })
                        .sum::<u64>()
                })
                .unwrap_or(0);
            UnitRow {
                unit: unit.clone(),
                spent: figure("spent"),
                overhead: figure("overhead"),
                allocated,
                reserve: figure("reserve"),
            }
        })
        .collect()
}

/// The milestone's new status after `event`, when the event changes one.
pub fn milestone_change(event: &WireEvent) -> Option<(String, String)> {
    let milestone = event.data.get("milestone").and_then(Value::as_str)?;
    let status = match event.kind.as_str() {
        kinds::MILESTONE_STARTED => "running",
        kinds::REPAIR_STARTED => "repairing",
        kinds::MILESTONE_BLOCKED => "blocked",
        kinds::MONITOR_DECIDED => match event.data.get("decision").and_then(Value::as_str) {
            Some("passed") => "done",
            Some("failing") => "checking",
            _ => "failed",
        },
        _ => return None,
    };
    Some((milestone.to_string(), status.to_string()))
}

/// The plain line of an event: `#SEQ KIND SUMMARY`.
pub fn event_line(event: &WireEvent) -> String {
    let summary = summary(event);
    if summary.is_empty() {
        format!("#{} {}", event.seq, event.kind)
    } else {
        format!("#{} {} {}", event.seq, event.kind, summary)
    }
}

/// The few fields of an event's data a reader wants, in words.
pub fn summary(event: &WireEvent) -> String {
    let data = &event.data;
    let milestone = text(data, "milestone");
    match event.kind.as_str() {
        kinds::TASK_CREATED => format!(
            "strategy {}: {}",
            text(data, "strategy"),
            clip(&text(data, "goal"))
        ),
        kinds::TASK_CLAIMED => format!(
            "by {} (attempt {})",
            text(data, "worker_id"),
            text(data, "attempt")
        ),
        kinds::GATE_DECIDED => format!(
            "route {}, strategy {}",
            text(data, "route"),
            text(data, "strategy")
        ),
        kinds::PLAN_ACCEPTED => format!(
            "version {}, {} milestones",
            text(data, "version"),
            text(data, "milestones")
        ),
        kinds::PLAN_REFUSED => format!("attempt {}", text(data, "attempt")),
        kinds::MILESTONE_STARTED => milestone,
        kinds::STEPS_PLANNED => steps_planned(data, &milestone),
        kinds::STEP_FINISHED => step_finished(data, &milestone),
        kinds::MONITOR_DECIDED => format!(
            "{milestone} {}: {}",
            text(data, "decision"),
            clip(&text(data, "reason"))
        ),
        kinds::REPAIR_STARTED => format!(
            "{milestone} {} ({}): {}",
            text(data, "level"),
            text(data, "reason"),
            clip(&text(data, "detail"))
        ),
        kinds::MILESTONE_BLOCKED => format!("{milestone} by {}", text(data, "dependency")),
        kinds::VERIFIER_DECIDED => format!(
            "verified {}: {}",
            text(data, "verified"),
            clip(&text(data, "reason"))
        ),
        kinds::LEDGER_ALLOCATE
        | kinds::LEDGER_CHARGE
        | kinds::LEDGER_GRANT
        | kinds::LEDGER_RETURN => movements(data),
        kinds::TASK_CANCELLED => format!("(was {})", text(data, "previous_status")),
        kinds::APPROVAL_REQUESTED => format!(
            "request {} ({}): waiting; decide with `cairn approve`",
            text(data, "approval"),
            text(data, "kind")
        ),
        kinds::APPROVAL_DECIDED => format!(
            "request {} {} by {}",
            text(data, "approval"),
            text(data, "decision"),
            text(data, "by")
        ),
        kinds::TASK_SUCCEEDED | kinds::TASK_FAILED | kinds::TASK_BUDGET_EXHAUSTED => {
            let result = data.get("result").cloned().unwrap_or(Value::Null);
            format!(
                "verified {}: {}",
                text(&result, "verified"),
                clip(&text(&result, "reason"))
            )
        }
        _ => String::new(),
    }
}

fn steps_planned(data: &Value, milestone: &str) -> String {
    let steps = match data.get("steps") {
        Some(Value::Array(items)) => items.len().to_string(),
        Some(other) => other.to_string(),
        None => "?".to_string(),
    };
    format!("{milestone}: {steps} steps")
}

fn step_finished(data: &Value, milestone: &str) -> String {
    let outcome = match data.get("ok").and_then(Value::as_bool) {
        Some(true) => "ok".to_string(),
        _ => format!("failed: {}", clip(&text(data, "error"))),
    };
    format!(
        "{milestone} {} {} {outcome}",
        text(data, "step"),
        text(data, "tool")
    )
}

/// `m1 tokens 1200, m1 tool_calls 1` for a run of ledger movements.
fn movements(data: &Value) -> String {
    let items = data
        .get("movements")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let parts: Vec<String> = items
        .iter()
        .map(|m| {
            let owner = m
                .get("milestone")
                .and_then(Value::as_str)
                .unwrap_or("reserve");
            format!("{owner} {} {}", text(m, "unit"), text(m, "amount"))
        })
        .collect();
    parts.join(", ")
}

/// The plan as lines: each milestone, what it waits for, its status.
pub fn plan_lines(rows: &[MilestoneRow]) -> Vec<String> {
    rows.iter()
        .map(|row| {
            let after = if row.depends_on.is_empty() {
                String::new()
            } else {
                format!(" after {}", row.depends_on.join(", "))
            };
            format!(
                "  milestone {} [{}] {}{after}",
                row.id,
                row.status,
                clip(&row.title)
            )
        })
        .collect()
}

/// The ledger as lines, one per unit.
pub fn ledger_lines(rows: &[UnitRow]) -> Vec<String> {
    rows.iter()
        .map(|row| {
            format!(
                "  ledger {}: spent {} (overhead {}), milestones hold {}, reserve {}",
                row.unit, row.spent, row.overhead, row.allocated, row.reserve
            )
        })
        .collect()
}

/// The closing line: the status, whether the goal was verified, and why.
pub fn result_line(status: &str, task: Option<&Value>) -> String {
    let result = task
        .and_then(|t| t.get("result"))
        .cloned()
        .unwrap_or(Value::Null);
    let verified = match result.get("verified").and_then(Value::as_bool) {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    let reason = match result.get("reason").and_then(Value::as_str) {
        Some(reason) if !reason.is_empty() => reason.to_string(),
        _ => text(&result, "cause"),
    };
    if reason.is_empty() {
        format!("result: {status}, verified: {verified}")
    } else {
        format!(
            "result: {status}, verified: {verified}, reason: {}",
            clip(&reason)
        )
    }
}

/// A field as text: strings as they are, other values as JSON, missing as empty.
pub fn text(value: &Value, name: &str) -> String {
    match value.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// One line, at most 160 characters.
pub fn clip(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= 160 {
        flat
    } else {
        let cut: String = flat.chars().take(157).collect();
        format!("{cut}...")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    fn event(seq: i64, kind: &str, data: Value) -> WireEvent {
        WireEvent {
            seq,
            kind: kind.to_string(),
            data,
        }
    }

    #[test]
    fn event_lines_carry_seq_kind_and_the_fields_that_matter() {
        let started = event(7, kinds::MILESTONE_STARTED, json!({"milestone": "m1"}));
        assert_eq!(event_line(&started), "#7 milestone.started m1");
        let passed = event(
            9,
            kinds::MONITOR_DECIDED,
            json!({"milestone": "m1", "decision": "passed", "reason": "check passed"}),
        );
        assert_eq!(
            event_line(&passed),
            "#9 monitor.decided m1 passed: check passed"
        );
        assert_eq!(
            milestone_change(&passed),
            Some(("m1".into(), "done".into()))
        );
        let odd = event(3, "task.claimed", json!({"worker_id": "w", "attempt": 1}));
        assert_eq!(event_line(&odd), "#3 task.claimed by w (attempt 1)");
    }

    #[test]
    fn plans_and_ledgers_read_from_the_api_shapes() {
        let plan = json!({"version": 1, "plan": {"milestones": [
            {"id": "m1", "title": "Gather", "depends_on": [], "status": "pending"},
            {"id": "m2", "title": "Write", "depends_on": ["m1"]}]}});
        let rows = milestones_of(&plan);
        assert_eq!(
            plan_lines(&rows)[1],
            "  milestone m2 [pending] Write after m1"
        );
        let ledger = json!({"units": {"tokens": {"reserve": 40, "spent": 30, "overhead": 5,
            "milestones": {"m1": {"allocated": 50, "granted": 10, "spent": 30, "returned": 0}}}}});
        assert_eq!(
            ledger_lines(&units_of(&ledger))[0],
            "  ledger tokens: spent 30 (overhead 5), milestones hold 60, reserve 40"
        );
        let task = json!({"result": {"verified": true, "reason": "all checks passed"}});
        assert_eq!(
            result_line("succeeded", Some(&task)),
            "result: succeeded, verified: yes, reason: all checks passed"
        );
    }
}
