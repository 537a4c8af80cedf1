//! One stored run as text, call by call (`cairn eval calls`): a line of what each call was and
//! cost, then its input (goal, milestone, the tools offered by name), its turns in brief and
//! its answer; with `full`, the prompt text and the whole input, turns and answer schema too.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::read::Run;
use super::{Answer, PROMPTS_DIR, StoredCall, sha8};
use cairn::engine::prompts;
use cairn::engine::runtime::ports::Speaker;

/// How many characters of a turn the brief form shows.
const TURN_CHARS: usize = 120;

/// `run` as text; `dir` is the folder of its log, where `prompts/` lies.
pub fn render(run: &Run, dir: &Path, full: bool) -> String {
    let strategy = run.strategy.map_or("?", |s| s.as_str());
    let mut task_ids: Vec<_> = run.calls.iter().map(|c| c.task_id).collect();
    task_ids.sort_unstable();
    task_ids.dedup();
    let mut out = format!(
        "task {}, strategy {strategy}, repeat {}: {} calls",
        run.task,
        run.repeat,
        run.calls.len()
    );
    let _ = match task_ids.as_slice() {
        [one] => writeln!(out, " (cairn task {one})"),
        more => writeln!(
            out,
            " in {} cairn tasks (an interrupted run was run again after --resume)",
            more.len()
        ),
    };
    let mut current = None;
    for call in &run.calls {
        if task_ids.len() > 1 && current != Some(call.task_id) {
            let _ = writeln!(out, "\n== cairn task {}", call.task_id);
            current = Some(call.task_id);
        }
        out.push('\n');
        out.push_str(&headline(call));
        out.push_str(&body(call, dir, full));
    }
    out
}

/// `#seq purpose, milestone M, attempt N (explore) | version | tokens | ms | verdict`.
fn headline(call: &StoredCall) -> String {
    let milestone = call
        .milestone
        .as_deref()
        .map(|m| format!(", milestone {m}"))
        .unwrap_or_default();
    let sampling = match call.sampling.as_str() {
        "endpoint" => String::new(),
        other => format!(" ({other})"),
    };
    let verdict = match &call.verdict {
        Some(j) => format!(
            "{} ({} pending, {} unwritten)",
            serde_json::to_value(j.first)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            j.pending,
            j.unwritten
        ),
        None => "-".to_string(),
    };
    format!(
        "#{} {}{milestone}, attempt {}{sampling} | {} | {} tokens | {} ms | verdict: {verdict}\n",
        call.seq,
        call.purpose.as_str(),
        call.attempt,
        call.version(),
        call.tokens,
        call.latency_ms
    )
}

fn body(call: &StoredCall, dir: &Path, full: bool) -> String {
    let mut out = String::new();
    if full {
        let _ = writeln!(out, "  prompt:\n{}", indented(&prompt_text(call, dir)));
        let _ = writeln!(out, "  input:\n{}", pretty(&call.input));
    } else {
        out.push_str(&input_brief(&call.input));
    }
    let _ = writeln!(out, "  turns: {}", call.turns.len());
    for turn in &call.turns {
        let speaker = match turn.speaker {
            Speaker::Model => "model",
            Speaker::Engine => "engine",
        };
        let text = match full {
            true => format!("\n{}", pretty(&turn.content)),
            false => brief(&turn.content),
        };
        let _ = writeln!(out, "    {speaker}: {text}");
    }
    if full && let Some(schema) = &call.schema {
        let _ = writeln!(out, "  answer schema:\n{}", pretty(schema));
    }
    match &call.answer {
        Answer::Value(value) => {
            let _ = writeln!(out, "  answer:\n{}", pretty(value));
        }
        Answer::Error { kind, message } => {
            let kind = serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = writeln!(out, "  answer: none, error {kind}: {message}");
        }
    }
    out
}

/// The goal, the milestone, the tools offered by name and the names of the rest of the input.
fn input_brief(input: &Value) -> String {
    let mut out = String::new();
    if let Some(goal) = input.get("goal") {
        let _ = writeln!(out, "  goal: {}", text_of(goal));
    }
    if let Some(milestone) = input.get("milestone") {
        let id = milestone.get("id").map(text_of);
        let title = milestone.get("title").map(text_of);
        let text = match (id, title) {
            (Some(id), Some(title)) => format!("{id}: {title}"),
            _ => brief(milestone),
        };
        let _ = writeln!(out, "  milestone: {text}");
    }
    if let Some(tools) = input.get("tools").and_then(Value::as_array) {
        let names: Vec<String> = tools
            .iter()
            .map(|t| t.get("name").map_or_else(|| brief(t), text_of))
            .collect();
        let _ = writeln!(out, "  tools offered: {}", names.join(", "));
    }
    if let Some(object) = input.as_object() {
        let rest: Vec<&str> = object
            .keys()
            .map(String::as_str)
            .filter(|k| !matches!(*k, "goal" | "milestone" | "tools"))
            .collect();
        if !rest.is_empty() {
            let _ = writeln!(out, "  input also: {}", rest.join(", "));
        }
    } else {
        let _ = writeln!(out, "  input: {}", brief(input));
    }
    out
}

/// The prompt text: `prompts/<sha8>.md` beside the log, else the engine's prompt of that hash.
fn prompt_text(call: &StoredCall, dir: &Path) -> String {
    let path = dir
        .join(PROMPTS_DIR)
        .join(format!("{}.md", call.prompt_sha8));
    if let Ok(text) = std::fs::read_to_string(&path) {
        return text;
    }
    prompts::ALL
        .iter()
        .find(|p| sha8(p.text) == call.prompt_sha8)
        .map(|p| p.text.to_string())
        .unwrap_or_else(|| format!("(not stored: {} is missing)", path.display()))
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One line of compact JSON, cut at [`TURN_CHARS`] characters.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(TURN_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

fn pretty(value: &Value) -> String {
    indented(&serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()))
}

fn indented(text: &str) -> String {
    text.lines()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}
