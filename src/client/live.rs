//! The terminal view of a followed task: a status line with the current step, one line per
//! milestone of the plan with its status, one bar per ledger unit (spent against allocated,
//! the reserve beside it), and the notable events (repairs, checks, the result) printed above.

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::render::{MilestoneRow, UnitRow, clip};

/// A bar's style, or the default one when the template is refused (it is fixed text, so that
/// would be a mistake here, and the default still shows progress).
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

pub struct Live {
    multi: MultiProgress,
    status: ProgressBar,
    milestones: Vec<(String, ProgressBar)>,
    units: Vec<(String, ProgressBar)>,
}

impl Live {
    pub fn new(task_id: &str) -> Live {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let status = multi.add(ProgressBar::new_spinner());
        status.set_style(style("{spinner} {prefix} {msg}"));
        status.set_prefix(format!("task {task_id}"));
        status.set_message("waiting for events");
        status.enable_steady_tick(Duration::from_millis(120));
        Live {
            multi,
            status,
            milestones: Vec::new(),
            units: Vec::new(),
        }
    }

    /// A line above the bars (repairs, checks, the result).
    pub fn note(&self, line: &str) {
        // A terminal that went away is no reason to stop: the exit code still tells.
        let _ = self.multi.println(line);
    }

    /// The current activity (the latest step or event).
    pub fn activity(&self, text: &str) {
        self.status.set_message(clip(text));
    }

    /// Shows `rows` as the plan, replacing an earlier plan's lines.
    pub fn plan(&mut self, rows: &[MilestoneRow]) {
        for (_, bar) in self.milestones.drain(..) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        for row in rows {
            self.plan_add(row);
        }
    }

    /// Redraws the milestone `row` (adding it when the plan was not read).
    pub fn milestone(&mut self, row: &MilestoneRow) {
        if let Some((_, bar)) = self.milestones.iter().find(|(id, _)| *id == row.id) {
            bar.set_message(milestone_text(row));
            return;
        }
        self.plan_add(row);
    }

    fn plan_add(&mut self, row: &MilestoneRow) {
        let bar = self.multi.add(ProgressBar::new(1));
        bar.set_style(style("  {prefix} {msg}"));
        bar.set_prefix(row.id.clone());
        bar.set_message(milestone_text(row));
        self.milestones.push((row.id.clone(), bar));
    }

    /// Sets the ledger bars to `rows`.
    pub fn ledger(&mut self, rows: &[UnitRow]) {
        for row in rows {
            let existing = self.units.iter().position(|(unit, _)| *unit == row.unit);
            let bar = match existing.and_then(|index| self.units.get(index)) {
                Some((_, bar)) => bar.clone(),
                None => {
                    let bar = self.multi.add(ProgressBar::new(1));
                    bar.set_style(style("  {prefix:>10} [{bar:30}] {pos}/{len} {msg}"));
                    bar.set_prefix(row.unit.clone());
                    self.units.push((row.unit.clone(), bar.clone()));
                    bar
                }
            };
            // Overhead and grants can take spend past the milestones' allocations.
            bar.set_length(row.allocated.max(row.spent).max(1));
            bar.set_position(row.spent);
            bar.set_message(format!("reserve {}", row.reserve));
        }
    }

    /// Stops the bars, leaving them on screen, and prints the closing line under them.
    pub fn finish(&self, line: &str) {
        self.status.finish_with_message(clip(line));
        for (_, bar) in self.milestones.iter().chain(self.units.iter()) {
            bar.finish();
        }
    }
}

fn milestone_text(row: &MilestoneRow) -> String {
    let after = if row.depends_on.is_empty() {
        String::new()
    } else {
        format!(" (after {})", row.depends_on.join(", "))
    };
    format!("[{}] {}{after}", row.status, clip(&row.title))
}
