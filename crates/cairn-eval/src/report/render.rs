//! The human-readable report files: the Markdown report (with its headline table) and the
//! SVG chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Report;

/// "94% (12 runs)": the share of the replanned runs' performed steps not performed again.
fn preserved(a: &super::Aggregate) -> String {
    match a.work_preserved {
        _ if a.replanned == 0 => "- (no replan)".into(),
        None => format!("- ({} runs, no step performed)", a.replanned),
        Some(share) => format!("{:.0}% ({} runs)", share * 100.0, a.replanned),
    }
}

impl Report {
    /// The headline table (also what the README shows).
    pub fn headline(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| strategy | verified success | claimed | false success | mean tokens | tokens per verified success | mean tool calls | mean model calls | repairs L1/L2/L3 | faults recovered | work preserved across replans | repeated side effects |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        for name in &self.strategies {
            let Some(a) = self.aggregates.get(name) else {
                continue;
            };
            let rep = |l: &str| a.repairs.get(l).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "| {name} | {}/{} ({:.0}%) | {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {}/{}/{} | {}/{} | {} | {} |",
                a.verified,
                a.runs,
                a.success_rate * 100.0,
                a.claimed,
                a.false_success,
                a.mean_tokens,
                a.tokens_per_verified,
                a.mean_tool_calls,
                a.mean_model_calls,
                rep("retry_step"),
                rep("replan_milestone"),
                rep("replan_strategy"),
                a.recovered,
                a.faults_fired,
                preserved(a),
                a.repeated_side_effects
            );
        }
        out
    }

    pub fn markdown(&self) -> String {
        let mut out = String::new();
        if self.simulated {
            let _ = writeln!(
                out,
                "# Evaluation report: suite `{}` (simulated)\n",
                self.suite
            );
            let _ = writeln!(
                out,
                "Every model and tool answer below is **simulated** (`cairn eval`'s world model, \
                 profile `{}`, seed {}, guess_success {}); {} repeat(s) per task and strategy. See \
                 docs/evaluation.md.\n",
                self.profile.as_str(),
                self.seed,
                self.guess_success,
                self.repeat
            );
        } else {
            let _ = writeln!(out, "# Evaluation report: suite `{}` (live)\n", self.suite);
            let _ = writeln!(
                out,
                "The model answers below come from a **real model**, `{}` (`cairn eval --live`); the \
                 tools and acceptance checks are the suite's simulated world (seed {}). {} repeat(s) \
                 per task and strategy. See docs/evaluation.md.\n",
                self.model, self.seed, self.repeat
            );
        }
        if self.records.len() < self.planned_runs {
            let _ = writeln!(
                out,
                "**Incomplete**: {} of the matrix's {} runs are recorded so far (`cairn eval \
                 --resume` runs the rest); every figure below is over the recorded runs only.\n",
                self.records.len(),
                self.planned_runs
            );
        }
        if !self.prompts.is_empty() {
            let _ = writeln!(out, "Prompts: {}.\n", self.prompts.join(", "));
        }
        let _ = writeln!(out, "## Per strategy\n\n{}", self.headline());
        self.markdown_categories(&mut out);
        self.markdown_funnel(&mut out);
        self.markdown_faults(&mut out);
        self.markdown_tasks(&mut out);
        self.markdown_regressions(&mut out);
        out
    }

    /// The per strategy and category table.
    fn markdown_categories(&self, out: &mut String) {
        let _ = writeln!(out, "## Per strategy and category (success, mean tokens)\n");
        let _ = writeln!(
            out,
            "| strategy | simple | medium | uncertain |\n|---|---|---|---|"
        );
        for name in &self.strategies {
            let cell = |c: &str| {
                self.by_category
                    .get(name)
                    .and_then(|m| m.get(c))
                    .map(|a| format!("{:.0}%, {:.0}", a.success_rate * 100.0, a.mean_tokens))
                    .unwrap_or_else(|| "-".into())
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} |",
                cell("simple"),
                cell("medium"),
                cell("uncertain")
            );
        }
    }

    /// Recovery per injected failure class: verified runs among those where the fault fired,
    /// per strategy: whether it recovers once the happy path breaks.
    fn markdown_faults(&self, out: &mut String) {
        let mut classes: Vec<&str> = self
            .records
            .iter()
            .filter_map(|r| r.fault.as_deref())
            .collect();
        classes.sort_unstable();
        classes.dedup();
        if classes.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n## Recovery per injected failure class (verified / fault fired)\n"
        );
        let _ = write!(out, "| failure class |");
        for name in &self.strategies {
            let _ = write!(out, " {name} |");
        }
        let _ = writeln!(out, "\n|---|{}", "---|".repeat(self.strategies.len()));
        for class in classes {
            let _ = write!(out, "| {class} |");
            for name in &self.strategies {
                let fired = self.records.iter().filter(|r| {
                    &r.strategy == name && r.fault.as_deref() == Some(class) && r.fault_fired
                });
                let (recovered, total) =
                    fired.fold((0, 0), |(ok, n), r| (ok + u32::from(r.verified), n + 1));
                let _ = write!(out, " {recovered}/{total} |");
            }
            let _ = writeln!(out);
        }
    }

    /// The per task table: one column per strategy.
    fn markdown_tasks(&self, out: &mut String) {
        let _ = writeln!(out, "\n## Per task (verified/runs, mean tokens)\n");
        let _ = write!(out, "| task | category | fault |");
        for name in &self.strategies {
            let _ = write!(out, " {name} |");
        }
        let _ = write!(out, "\n|---|---|---|");
        for _ in &self.strategies {
            let _ = write!(out, "---|");
        }
        let _ = writeln!(out);
        for (task, cells) in &self.per_task {
            let first = self.records.iter().find(|r| &r.task == task);
            let category = first.map(|r| r.category.as_str()).unwrap_or("");
            let fault = first.and_then(|r| r.fault.as_deref()).unwrap_or("");
            let _ = write!(out, "| {task} | {category} | {fault} |");
            for name in &self.strategies {
                match cells.get(name) {
                    Some((ok, n, tokens)) => {
                        let _ = write!(out, " {ok}/{n}, {tokens:.0} |");
                    }
                    None => {
                        let _ = write!(out, " - |");
                    }
                }
            }
            let _ = writeln!(out);
        }
    }

    /// The regressions, grouped by (solver, non-solver).
    fn markdown_regressions(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\n## Regressions (solved by one strategy, not by another)\n"
        );
        if self.regressions.is_empty() {
            let _ = writeln!(out, "None.");
        }
        let mut grouped: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
        for r in &self.regressions {
            grouped
                .entry((r.solved_by.as_str(), r.failed_by.as_str()))
                .or_default()
                .push(r.task.as_str());
        }
        for ((solved, failed), tasks) in grouped {
            let _ = writeln!(
                out,
                "- solved by {solved}, not by {failed}: {}",
                tasks.join(", ")
            );
        }
    }

    /// Success rate against mean tokens, one point per (strategy, category).
    pub fn svg(&self) -> String {
        const W: f64 = 640.0;
        const H: f64 = 400.0;
        const M: f64 = 60.0;
        let colors = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e"];
        let max_tokens = self
            .by_category
            .values()
            .flat_map(|m| m.values())
            .map(|a| a.mean_tokens)
            .fold(1.0_f64, f64::max);
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            out,
            r#"<text x="{M}" y="20" font-size="13">Success vs cost per strategy and category (simulated, suite {})</text>"#,
            self.suite
        );
        let _ = writeln!(
            out,
            r#"<line x1="{M}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
            H - M,
            W - 20.0,
            H - M
        );
        let _ = writeln!(
            out,
            r#"<line x1="{M}" y1="30" x2="{M}" y2="{}" stroke="black"/>"#,
            H - M
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}">mean tokens per run (max {max_tokens:.0})</text>"#,
            W / 2.0 - 60.0,
            H - 25.0
        );
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" transform="rotate(-90 10 {})">verified success</text>"#,
            H / 2.0,
            H / 2.0
        );
        for (tick, label) in [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")] {
            let y = H - M - tick * (H - M - 40.0);
            let _ = writeln!(out, r#"<text x="25" y="{y:.1}">{label}</text>"#);
        }
        let marks = [("simple", "S"), ("medium", "M"), ("uncertain", "U")];
        for (index, name) in self.strategies.iter().enumerate() {
            let color = colors[index % colors.len()];
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" fill="{color}">■ {name}</text>"#,
                W - 120.0,
                40.0 + 15.0 * index as f64
            );
            for (category, mark) in marks {
                let Some(a) = self.by_category.get(name).and_then(|m| m.get(category)) else {
                    continue;
                };
                let x = M + a.mean_tokens / max_tokens * (W - M - 140.0);
                let y = H - M - a.success_rate * (H - M - 40.0);
                let _ = writeln!(
                    out,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="9" fill="{color}" fill-opacity="0.7"/><text x="{:.1}" y="{:.1}" fill="white" font-weight="bold">{mark}</text>"#,
                    x - 4.0,
                    y + 4.0
                );
            }
        }
        let _ = writeln!(
            out,
            r#"<text x="{M}" y="{}">S = simple, M = medium, U = uncertain</text>"#,
            H - 8.0
        );
        out.push_str("</svg>\n");
        out
    }
}
