//! Where a followed task is shown: plain lines (stdout is not a terminal), bars (it is), or
//! the events as JSON lines (`--json`).

use cairn::domain::event::kinds;
use serde_json::Value;

use super::api::WireEvent;
use super::live::Live;
use super::render::{
    MilestoneRow, UnitRow, event_line, ledger_lines, milestone_change, plan_lines, result_line, say,
};

enum Mode {
    Plain,
    Json,
    Live(Live),
}

pub struct View {
    mode: Mode,
    milestones: Vec<MilestoneRow>,
}

impl View {
    /// JSON lines with `json`; bars when `terminal`; plain lines otherwise.
    pub fn new(task_id: &str, json: bool, terminal: bool) -> View {
        let mode = if json {
            Mode::Json
        } else if terminal {
            Mode::Live(Live::new(task_id))
        } else {
            Mode::Plain
        };
        View {
            mode,
            milestones: Vec::new(),
        }
    }

    /// Whether the plan and the ledger are worth reading for this view (JSON lines carry the
    /// events alone).
    pub fn wants_details(&self) -> bool {
        !matches!(self.mode, Mode::Json)
    }

    /// One event, as it arrived (`raw`) and as read.
    pub fn event(&mut self, event: &WireEvent, raw: &Value) {
        let line = event_line(event);
        match &self.mode {
            Mode::Json => say(&raw.to_string()),
            Mode::Plain => say(&line),
            Mode::Live(live) => {
                live.activity(&line);
                if notable(event) {
                    live.note(&line);
                }
            }
        }
        let Some((id, status)) = milestone_change(event) else {
            return;
        };
        let index = match self.milestones.iter().position(|m| m.id == id) {
            Some(index) => index,
            None => {
                self.milestones.push(MilestoneRow {
                    id: id.clone(),
                    title: String::new(),
                    depends_on: Vec::new(),
                    status: String::new(),
                });
                self.milestones.len() - 1
            }
        };
        if let Some(row) = self.milestones.get_mut(index) {
            row.status = status;
            if let Mode::Live(live) = &mut self.mode {
                live.milestone(row);
            }
        }
    }

    /// A plan version's milestones (the plan's own statuses).
    pub fn plan(&mut self, rows: Vec<MilestoneRow>) {
        match &mut self.mode {
            Mode::Json => {}
            Mode::Plain => plan_lines(&rows).iter().for_each(|line| say(line)),
            Mode::Live(live) => live.plan(&rows),
        }
        self.milestones = rows;
    }

    /// The ledger's books per unit.
    pub fn ledger(&mut self, rows: &[UnitRow]) {
        match &mut self.mode {
            Mode::Json => {}
            Mode::Plain => ledger_lines(rows).iter().for_each(|line| say(line)),
            Mode::Live(live) => live.ledger(rows),
        }
    }

    /// The closing line once the task has ended.
    pub fn finish(&mut self, status: &str, task: Option<&Value>) {
        let line = result_line(status, task);
        match &self.mode {
            Mode::Json => {}
            Mode::Plain => say(&line),
            Mode::Live(live) => {
                live.note(&line);
                live.finish(&line);
            }
        }
    }

    /// Something about the connection, not the task: on stderr, or above the bars.
    pub fn notice(&self, text: &str) {
        match &self.mode {
            Mode::Live(live) => live.note(&format!("cairn: {text}")),
            Mode::Plain | Mode::Json => eprintln!("cairn: {text}"),
        }
    }
}

/// Events worth a line above the bars; the rest only update the status line.
fn notable(event: &WireEvent) -> bool {
    let step_failed = event.kind == kinds::STEP_FINISHED
        && event.data.get("ok").and_then(Value::as_bool) != Some(true);
    step_failed
        || kinds::is_terminal(&event.kind)
        || [
            kinds::GATE_DECIDED,
            kinds::PLAN_ACCEPTED,
            kinds::PLAN_REFUSED,
            kinds::MILESTONE_STARTED,
            kinds::MONITOR_DECIDED,
            kinds::REPAIR_STARTED,
            kinds::MILESTONE_BLOCKED,
            kinds::VERIFIER_DECIDED,
        ]
        .contains(&event.kind.as_str())
}
