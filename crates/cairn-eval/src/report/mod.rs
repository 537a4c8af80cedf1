//! Per-run records, aggregates, regressions, and the three report files (Markdown, JSON,
//! SVG chart of success against cost per strategy and category).
//!
//! A task counts as *solved* by a strategy when more than half of its repeats were verified.
//! A regression is a task one strategy solved and another did not; `v2_regressions` (tasks
//! some baseline solved and v2 did not) is what the rollout gate reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::suite::Suite;

mod funnel;
#[cfg(test)]
mod funnel_tests;
mod record;
mod render;
mod tally;
use cairn::domain::task::Strategy;
pub use funnel::{Funnel, RepairYield};
pub use record::{Record, RunInputs};
pub use tally::{FunnelCounts, FunnelReport, Stage};

/// Aggregates of one strategy (over all tasks, or one category).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    pub runs: u32,
    pub verified: u32,
    /// Runs that ended `succeeded`, and those of them the world's check did not confirm.
    #[serde(default)]
    pub claimed: u32,
    #[serde(default)]
    pub false_success: u32,
    pub success_rate: f64,
    pub mean_tokens: f64,
    /// Every token the strategy spent, over its verified successes (0 when it had none): what
    /// one verified success costs.
    #[serde(default)]
    pub tokens_per_verified: f64,
    pub mean_tool_calls: f64,
    pub mean_model_calls: f64,
    pub mean_wall_ms: f64,
    pub repairs: BTreeMap<String, u64>,
    pub faults_fired: u32,
    pub recovered: u32,
    pub repeated_side_effects: u32,
    #[serde(default)]
    pub misordered: u32,
    /// Runs that replanned (L2 or L3), and the share of the steps they performed that they
    /// performed only once: completed work preserved across replans (`None` when no step of
    /// a replanned run was performed).
    #[serde(default)]
    pub replanned: u32,
    #[serde(default)]
    pub work_preserved: Option<f64>,
    pub gate_direct: u32,
    pub gate_plan: u32,
}

impl Aggregate {
    fn of<'a>(records: impl Iterator<Item = &'a Record>) -> Aggregate {
        let mut a = Aggregate::default();
        let (mut tokens, mut tools, mut models, mut wall) = (0u64, 0u64, 0u64, 0u64);
        let (mut kept, mut redone) = (0u64, 0u64);
        for r in records {
            if r.replanned() {
                a.replanned += 1;
                kept += u64::from(r.steps_performed);
                redone += u64::from(r.steps_redone);
            }
            a.runs += 1;
            a.verified += u32::from(r.verified);
            a.claimed += u32::from(r.claimed);
            a.false_success += u32::from(r.claimed && !r.verified);
            tokens += r.tokens;
            tools += r.tool_calls;
            models += u64::from(r.model_calls);
            wall += r.wall_ms;
            for (level, n) in &r.repairs {
                *a.repairs.entry(level.clone()).or_default() += n;
            }
            a.faults_fired += u32::from(r.fault_fired);
            a.recovered += u32::from(r.recovered == Some(true));
            a.repeated_side_effects += r.repeated_side_effects;
            a.misordered += r.misordered;
            match r.gate.as_deref() {
                Some("direct") => a.gate_direct += 1,
                Some("plan") => a.gate_plan += 1,
                _ => {}
            }
        }
        if a.runs > 0 {
            let n = f64::from(a.runs);
            a.success_rate = f64::from(a.verified) / n;
            a.mean_tokens = tokens as f64 / n;
            if a.verified > 0 {
                a.tokens_per_verified = tokens as f64 / f64::from(a.verified);
            }
            a.mean_tool_calls = tools as f64 / n;
            a.mean_model_calls = models as f64 / n;
            a.mean_wall_ms = wall as f64 / n;
        }
        a.work_preserved = (kept + redone > 0).then(|| kept as f64 / (kept + redone) as f64);
        a
    }
}

/// A task one strategy solved and another did not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    pub task: String,
    pub solved_by: String,
    pub failed_by: String,
}

/// Everything `report.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// False for `cairn eval --live`: the model answers came from `model`.
    pub simulated: bool,
    #[serde(default)]
    pub model: String,
    /// The version (`name@hash8`) of every engine prompt.
    #[serde(default)]
    pub prompts: Vec<String>,
    pub suite: String,
    /// The model the simulated world played (`--profile`).
    #[serde(default)]
    pub profile: crate::suite::Profile,
    pub seed: u64,
    pub guess_success: f64,
    pub repeat: u32,
    pub strategies: Vec<String>,
    pub aggregates: BTreeMap<String, Aggregate>,
    /// strategy -> category -> aggregate.
    pub by_category: BTreeMap<String, BTreeMap<String, Aggregate>>,
    /// task -> strategy -> (verified runs, runs, mean tokens).
    pub per_task: BTreeMap<String, BTreeMap<String, (u32, u32, f64)>>,
    pub regressions: Vec<Regression>,
    /// Tasks some other strategy solved and v2 did not.
    pub v2_regressions: Vec<String>,
    /// What blocks a rollout increase: tasks the incumbent `v1` solved and the candidate did
    /// not. The candidate is `auto` (what the rollout routes: the gate, then v2) when it was
    /// evaluated, else `v2`. Empty when `v1` was not evaluated.
    pub rollout_regressions: Vec<String>,
    /// The strategy `rollout_regressions` judged.
    pub rollout_candidate: Option<String>,
    /// Runs of the matrix (tasks x strategies x repeats); fewer `records` than this means an
    /// evaluation still in progress (`cairn eval --resume` goes on with it).
    #[serde(default)]
    pub planned_runs: usize,
    /// Where runs were lost and what repairs yielded, per strategy and per task and strategy
    /// (docs/evaluation.md, "Funnel").
    #[serde(default)]
    pub funnel: FunnelReport,
    pub records: Vec<Record>,
}

/// task -> strategy -> (verified runs, runs, mean tokens).
type PerTask = BTreeMap<String, BTreeMap<String, (u32, u32, f64)>>;

/// strategy -> category -> aggregate.
type ByCategory = BTreeMap<String, BTreeMap<String, Aggregate>>;

impl Report {
    pub fn build(
        suite: &Suite,
        strategies: &[Strategy],
        repeat: u32,
        records: &[Record],
    ) -> Report {
        let names: Vec<String> = strategies.iter().map(|s| s.as_str().to_string()).collect();
        let (aggregates, by_category) = aggregate(&names, records);
        let per_task = per_task(suite, &names, records);
        let regressions = regressions(suite, &per_task);
        let mut v2_regressions: Vec<String> = regressions
            .iter()
            .filter(|r| r.failed_by == "v2")
            .map(|r| r.task.clone())
            .collect();
        v2_regressions.dedup();
        let (rollout_candidate, rollout_regressions) = rollout(&names, &regressions);
        let funnel = FunnelReport::build(&names, records);
        Report {
            simulated: true,
            model: String::new(),
            prompts: Vec::new(),
            suite: suite.name.clone(),
            profile: crate::suite::Profile::Suite,
            seed: suite.world.seed,
            guess_success: suite.world.guess_success,
            repeat,
            strategies: names,
            aggregates,
            by_category,
            per_task,
            regressions,
            v2_regressions,
            rollout_regressions,
            rollout_candidate,
            planned_runs: suite.tasks.len() * strategies.len() * repeat.max(1) as usize,
            funnel,
            records: records.to_vec(),
        }
    }
}

/// Aggregates per strategy, over all its runs and per category (categories without runs left out).
fn aggregate(names: &[String], records: &[Record]) -> (BTreeMap<String, Aggregate>, ByCategory) {
    let mut aggregates = BTreeMap::new();
    let mut by_category: ByCategory = BTreeMap::new();
    for name in names {
        let mine = || records.iter().filter(move |r| &r.strategy == name);
        aggregates.insert(name.clone(), Aggregate::of(mine()));
        for category in ["simple", "medium", "uncertain"] {
            let of = Aggregate::of(mine().filter(|r| r.category == category));
            if of.runs > 0 {
                by_category
                    .entry(name.clone())
                    .or_default()
                    .insert(category.into(), of);
            }
        }
    }
    (aggregates, by_category)
}

/// The (verified runs, runs, mean tokens) cell of every task and strategy that ran it.
fn per_task(suite: &Suite, names: &[String], records: &[Record]) -> PerTask {
    let mut per_task: PerTask = BTreeMap::new();
    for task in &suite.tasks {
        for name in names {
            let runs: Vec<&Record> = records
                .iter()
                .filter(|r| r.task == task.id && &r.strategy == name)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let ok = runs.iter().filter(|r| r.verified).count() as u32;
            let mean = runs.iter().map(|r| r.tokens).sum::<u64>() as f64 / runs.len() as f64;
            per_task
                .entry(task.id.clone())
                .or_default()
                .insert(name.clone(), (ok, runs.len() as u32, mean));
        }
    }
    per_task
}

/// Every (task, solver, non-solver) triple, in suite order.
fn regressions(suite: &Suite, per_task: &PerTask) -> Vec<Regression> {
    let solved = |cell: &(u32, u32, f64)| cell.0 * 2 > cell.1;
    let mut regressions = Vec::new();
    for task in &suite.tasks {
        let Some(cells) = per_task.get(&task.id) else {
            continue;
        };
        for (a, ca) in cells {
            for (b, cb) in cells {
                if a != b && solved(ca) && !solved(cb) {
                    regressions.push(Regression {
                        task: task.id.clone(),
                        solved_by: a.clone(),
                        failed_by: b.clone(),
                    });
                }
            }
        }
    }
    regressions
}

/// The rollout candidate (`auto`, else `v2`, when `v1` ran too) and the tasks `v1` solved and
/// it did not.
fn rollout(names: &[String], regressions: &[Regression]) -> (Option<String>, Vec<String>) {
    let rollout_candidate = ["auto", "v2"]
        .into_iter()
        .find(|c| names.iter().any(|n| n == c))
        .filter(|_| names.iter().any(|n| n == "v1"))
        .map(str::to_string);
    let rollout_regressions: Vec<String> = regressions
        .iter()
        .filter(|r| r.solved_by == "v1" && Some(&r.failed_by) == rollout_candidate.as_ref())
        .map(|r| r.task.clone())
        .collect();
    (rollout_candidate, rollout_regressions)
}
