//! The funnel counted over runs (per strategy, and per task and strategy) and its section of
//! the Markdown report: where runs were lost, stage by stage, and what repairs yielded.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::funnel::RepairYield;
use super::{Record, Report};

/// One stage over several runs: the runs it applied to, and those that reached it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    pub reached: u32,
    pub applicable: u32,
}

impl Stage {
    fn add(&mut self, stage: Option<bool>) {
        if let Some(reached) = stage {
            self.applicable += 1;
            self.reached += u32::from(reached);
        }
    }

    /// `reached/applicable`, or `-` where the stage applied to no run.
    fn cell(self) -> String {
        match self.applicable {
            0 => "-".into(),
            n => format!("{}/{n}", self.reached),
        }
    }
}

/// The funnel of several runs: each stage counted where it applied, `verified` over every run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunnelCounts {
    pub runs: u32,
    pub plan_accepted: Stage,
    pub tools_granted: Stage,
    pub first_call_right: Stage,
    pub value_carried: Stage,
    pub checks_passed: Stage,
    pub verified: Stage,
    pub repair_yield: RepairYield,
}

impl FunnelCounts {
    pub fn of<'a>(records: impl IntoIterator<Item = &'a Record>) -> FunnelCounts {
        let mut counts = FunnelCounts::default();
        for r in records {
            let f = &r.funnel;
            counts.runs += 1;
            counts.plan_accepted.add(f.plan_accepted);
            counts.tools_granted.add(f.tools_granted);
            counts.first_call_right.add(f.first_call_right);
            counts.value_carried.add(f.value_carried);
            counts.checks_passed.add(f.checks_passed);
            counts.verified.add(Some(r.verified));
            counts.repair_yield.add(r.repair_yield);
        }
        counts
    }

    /// The stages in funnel order, with their column titles.
    fn stages(&self) -> [(&'static str, Stage); 6] {
        [
            ("plan accepted", self.plan_accepted),
            ("tools granted", self.tools_granted),
            ("first call right", self.first_call_right),
            ("value carried", self.value_carried),
            ("checks passed", self.checks_passed),
            ("verified", self.verified),
        ]
    }
}

/// The funnel of an evaluation, as `report.json` carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunnelReport {
    /// strategy -> its runs' funnel.
    pub per_strategy: BTreeMap<String, FunnelCounts>,
    /// task -> strategy -> the funnel of its repeats.
    pub per_task: BTreeMap<String, BTreeMap<String, FunnelCounts>>,
}

impl FunnelReport {
    /// Over `records`, for the strategies `names` (those with no run left out).
    pub fn build(names: &[String], records: &[Record]) -> FunnelReport {
        let mut report = FunnelReport::default();
        for name in names {
            let mine: Vec<&Record> = records.iter().filter(|r| &r.strategy == name).collect();
            if mine.is_empty() {
                continue;
            }
            report
                .per_strategy
                .insert(name.clone(), FunnelCounts::of(mine.iter().copied()));
            let mut tasks: Vec<&str> = mine.iter().map(|r| r.task.as_str()).collect();
            tasks.sort_unstable();
            tasks.dedup();
            for task in tasks {
                let runs = mine.iter().copied().filter(|r| r.task == task);
                report
                    .per_task
                    .entry(task.to_string())
                    .or_default()
                    .insert(name.clone(), FunnelCounts::of(runs));
            }
        }
        report
    }
}

impl Report {
    /// The funnel table (reached / applicable per stage) and the repair yield, per strategy.
    pub(super) fn markdown_funnel(&self, out: &mut String) {
        let _ = writeln!(out, "\n## Funnel (reached / applicable)\n");
        let _ = writeln!(
            out,
            "Where runs were lost: a stage counts the runs it applies to and those that reached \
             it (docs/evaluation.md, \"Funnel\").\n"
        );
        let titles = FunnelCounts::default().stages().map(|(title, _)| title);
        let _ = writeln!(out, "| strategy | {} |", titles.join(" | "));
        let _ = writeln!(out, "|---|{}", "---|".repeat(titles.len()));
        let rows = || {
            self.strategies
                .iter()
                .filter_map(|name| Some((name, self.funnel.per_strategy.get(name)?)))
        };
        for (name, counts) in rows() {
            let cells: Vec<String> = counts.stages().iter().map(|(_, s)| s.cell()).collect();
            let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
        }
        let _ = writeln!(
            out,
            "\nRepair yield (repair step lists and plans proposed, those not repeating a failed \
             one, those followed by their milestone passing):\n"
        );
        for (name, counts) in rows() {
            let y = counts.repair_yield;
            let _ = writeln!(
                out,
                "- {name}: {} proposed, {} different, {} then passed",
                y.repairs_proposed, y.repairs_different, y.repairs_then_passed
            );
        }
    }
}
