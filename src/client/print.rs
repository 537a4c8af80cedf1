//! The plain answers of the one-shot commands: a task, a page of tasks, the tools. With
//! `--json` the server's JSON is printed instead, on one line.

use serde_json::Value;

use super::render::{clip, result_line, say, text};

/// The server's answer as one line of JSON.
pub fn json(value: &Value) {
    say(&value.to_string());
}

/// `tasks show`: one field a line, then the result once the task has ended.
pub fn task(task: &Value) {
    for line in task_lines(task) {
        say(&line);
    }
}

pub fn task_lines(task: &Value) -> Vec<String> {
    let budget = task.get("budget").cloned().unwrap_or(Value::Null);
    let mut lines = vec![
        format!("id        {}", text(task, "id")),
        format!("status    {}", text(task, "status")),
        format!("strategy  {}", text(task, "strategy")),
        format!("goal      {}", clip(&text(task, "goal"))),
        format!(
            "budget    tokens {}, tool_calls {}, wall_ms {}",
            text(&budget, "tokens"),
            text(&budget, "tool_calls"),
            text(&budget, "wall_ms")
        ),
        format!("created   {}", text(task, "created_at")),
    ];
    let plan = text(task, "plan_version");
    if !plan.is_empty() {
        lines.push(format!("plan      version {plan}"));
    }
    if let Some(Value::Array(tools)) = task.get("tools") {
        let names: Vec<&str> = tools.iter().filter_map(Value::as_str).collect();
        lines.push(format!("tools     {}", names.join(", ")));
    }
    if let Some(progress) = task.get("progress").filter(|p| p.is_object()) {
        lines.push(format!("progress  {}", progress_text(progress)));
    }
    let finished = text(task, "finished_at");
    if !finished.is_empty() {
        lines.push(format!("finished  {finished}"));
        lines.extend(produced_lines(task.get("result").unwrap_or(&Value::Null)));
        lines.push(result_line(&text(task, "status"), Some(task)));
    }
    lines
}

/// `execute: 1 of 3 milestones done, under way m2 (Edit B); spent tokens 900, tool_calls 2,
/// wall_ms 1200`.
fn progress_text(progress: &Value) -> String {
    let spent = progress.get("spent").cloned().unwrap_or(Value::Null);
    let current: Vec<String> = progress
        .get("current")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| format!("{} ({})", text(m, "id"), clip(&text(m, "title"))))
        .collect();
    let under_way = match current.is_empty() {
        true => String::new(),
        false => format!(", under way {}", current.join(", ")),
    };
    format!(
        "{}: {} of {} milestones done{under_way}; spent tokens {}, tool_calls {}, wall_ms {}",
        text(progress, "phase"),
        text(progress, "milestones_done"),
        text(progress, "milestones_total"),
        text(&spent, "tokens"),
        text(&spent, "tool_calls"),
        text(&spent, "wall_ms")
    )
}

/// What a finished task produced: its answer, or its artifacts a line each.
fn produced_lines(result: &Value) -> Vec<String> {
    let answer = result
        .get("answer")
        .filter(|a| !a.is_null())
        .or_else(|| result.get("extra").and_then(|e| e.get("answer")));
    let mut lines: Vec<String> = answer
        .map(|a| format!("answer    {}", clip(&a.to_string())))
        .into_iter()
        .collect();
    let artifacts = result.get("artifacts").and_then(Value::as_object);
    for (milestone, named) in artifacts.into_iter().flatten() {
        for (name, value) in named.as_object().into_iter().flatten() {
            lines.push(format!(
                "artifact  {milestone}.{name} = {}",
                clip(&value.to_string())
            ));
        }
    }
    lines
}

/// `tasks list`: a header, then one task a line, tab-separated.
pub fn task_page(page: &Value) {
    say("ID\tSTATUS\tSTRATEGY\tCREATED\tGOAL");
    let items = page
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for task in &items {
        say(&format!(
            "{}\t{}\t{}\t{}\t{}",
            text(task, "id"),
            text(task, "status"),
            text(task, "strategy"),
            text(task, "created_at"),
            clip(&text(task, "goal"))
        ));
    }
    if let Some(cursor) = page.get("next_cursor").and_then(Value::as_str) {
        eprintln!("cairn: more tasks follow (cursor {cursor}); raise --limit to see more");
    }
}

/// `tools`: name, whether it has side effects, description.
pub fn tools(list: &Value) {
    say("NAME\tSIDE_EFFECTS\tSOURCE\tDESCRIPTION");
    let items = list
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for tool in &items {
        let writes = match tool.get("side_effects").and_then(Value::as_bool) {
            Some(true) => "yes",
            _ => "no",
        };
        let source = match tool.pointer("/source/server").and_then(Value::as_str) {
            Some(server) => format!("mcp:{server}"),
            None => "file".to_string(),
        };
        say(&format!(
            "{}\t{writes}\t{source}\t{}",
            text(tool, "name"),
            clip(&text(tool, "description"))
        ));
    }
    let servers = list
        .get("servers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for server in &servers {
        let state = match server.get("reachable").and_then(Value::as_bool) {
            Some(true) => format!("{} tools, {}", server["tools"], text(server, "protocol")),
            _ => format!("unreachable: {}", text(server, "error")),
        };
        say(&format!(
            "mcp server {} ({}): {state}",
            text(server, "name"),
            text(server, "url")
        ));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn an_ended_task_shows_its_result() {
        let task = json!({"id": "t1", "status": "failed", "strategy": "v2", "goal": "g",
            "budget": {"tokens": 5, "tool_calls": 1, "wall_ms": 9},
            "created_at": "c", "finished_at": "f", "plan_version": 2,
            "result": {"verified": false, "reason": "check failed"}});
        let lines = task_lines(&task);
        assert!(lines.contains(&"budget    tokens 5, tool_calls 1, wall_ms 9".to_string()));
        assert!(lines.contains(&"plan      version 2".to_string()));
        assert_eq!(
            lines.last().unwrap(),
            "result: failed, verified: no, reason: check failed"
        );
    }

    #[test]
    fn a_task_shows_its_progress_and_what_it_produced() {
        let task = json!({"id": "t1", "status": "succeeded", "strategy": "v2", "goal": "g",
            "budget": {"tokens": 5, "tool_calls": 1, "wall_ms": 9},
            "created_at": "c", "finished_at": "f",
            "progress": {"phase": "execute", "milestones_done": 1, "milestones_total": 2,
                "current": [{"id": "m2", "title": "Edit B"}], "steps_completed": 1,
                "spent": {"tokens": 900, "tool_calls": 2, "wall_ms": 1200}},
            "result": {"verified": true, "artifacts": {"m1": {"owner": "alice"}}}});
        let lines = task_lines(&task);
        assert!(lines.contains(&"progress  execute: 1 of 2 milestones done, under way m2 (Edit B); spent tokens 900, tool_calls 2, wall_ms 1200".to_string()), "{lines:#?}");
        assert!(
            lines.contains(&"artifact  m1.owner = \"alice\"".to_string()),
            "{lines:#?}"
        );
    }
}
