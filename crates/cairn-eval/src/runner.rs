//! `cairn eval`: the experiment matrix through the real service path.
//!
//! The composition root starts, in one process, a store ([`open_store`]:
//! a fresh SQLite file under the output directory, or the Postgres database given), the worker
//! pool running the one engine dispatch, the HTTP API on 127.0.0.1:0, and the simulated
//! [`super::world::World`] as the model and tool endpoints. [`super::drive::drive`] then submits every (task,
//! strategy, repeat) with `POST /v1/tasks` and follows it with `GET /v1/tasks/{id}` until it is
//! terminal; the world's acceptance check decides verified success, and [`conclude`] writes the
//! reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::error::EvalError;
use super::report::Record;
use super::resume::{RunKey, RunLog, RunsMeta, key_of};
use super::suite::{Profile, Suite};
use super::sweep::WorldParam;
use cairn::domain::settings::EngineSettings;
use cairn::domain::task::Strategy;
use cairn::engine::prompts;
use cairn::engine::runtime::ports::{ModelPort, Purpose};
use cairn::store::Store;

/// What `cairn eval` was asked to do.
#[derive(Debug, Clone)]
pub struct EvalParams {
    pub suite: PathBuf,
    pub strategies: Vec<Strategy>,
    pub repeat: u32,
    pub out: PathBuf,
    /// Postgres URL; `None` uses a fresh SQLite file under `out`.
    pub database_url: Option<String>,
    pub workers: usize,
    /// Print one line per finished run.
    pub progress: bool,
    /// `--live`: the model answers come from a configured endpoint instead of the world's
    /// policy; the world's tools and acceptance checks stay the same.
    pub live: Option<LiveModel>,
    /// World settings that replace the suite's own (what `--sweep` varies).
    pub overrides: Vec<(WorldParam, f64)>,
    /// `--profile`: the model the world plays (the suite's slip rates, or none).
    pub profile: Profile,
    /// `--resume`: keep the runs `out/runs.jsonl` holds and run only the rest of the matrix.
    pub resume: bool,
    /// `--max-runs`: submit at most this many of the runs still owed (`None`: all of them);
    /// with `--resume`, a long live evaluation goes on in bounded sittings.
    pub max_runs: Option<usize>,
    /// `--tasks`: only these tasks of the suite (`None`: all of them).
    pub tasks: Option<Vec<String>>,
}

impl EvalParams {
    /// The engine settings the runs use: the configured ones when live, else the defaults
    /// with one milestone at a time. Simulated answers come back in microseconds, so which of
    /// two parallel milestones escalates first is a race, and a race must not decide a report
    /// (two runs of one seed give the same report); parallel milestones are the engine tests'.
    pub fn engine_settings(&self) -> EngineSettings {
        match &self.live {
            Some(live) => live.engine.clone(),
            None => EngineSettings {
                max_parallel: 1,
                ..EngineSettings::default()
            },
        }
    }

    /// The wall-clock budget of each run, and how long the whole matrix may take. A real model
    /// answers in seconds per call, not microseconds.
    pub(super) fn timings(&self, runs: usize) -> (u64, Duration) {
        match &self.live {
            None => (120_000, Duration::from_secs(600)),
            Some(live) => {
                let per_run = live.run_wall_ms;
                let workers = self.workers.max(1) as u64;
                let rounds = (runs as u64).div_ceil(workers);
                (
                    per_run,
                    Duration::from_millis(per_run.saturating_mul(rounds + 1)),
                )
            }
        }
    }
}

/// The model of a live evaluation.
#[derive(Clone)]
pub struct LiveModel {
    pub models: Arc<dyn ModelPort>,
    /// What the report names as the model (the configured model id per purpose).
    pub model: String,
    /// The wall-clock budget of each run.
    pub run_wall_ms: u64,
    /// The engine settings of the configuration (a simulated run uses the defaults).
    pub engine: EngineSettings,
    /// Only these kinds of call go to the model, the world's policy answers the others
    /// (`--live-purposes`, [`super::routed`]); `None`: every call.
    pub live_for: Option<Vec<Purpose>>,
}

impl std::fmt::Debug for LiveModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveModel")
            .field("model", &self.model)
            .field("run_wall_ms", &self.run_wall_ms)
            .field("live_for", &self.live_for)
            .finish_non_exhaustive()
    }
}

/// The suite at `params.suite` with `params.overrides` applied to its world, checked again;
/// every task `--tasks` names must be in it.
pub fn load_suite(params: &EvalParams) -> Result<Suite, EvalError> {
    let mut suite = Suite::load(&params.suite)?;
    if let Some(unknown) = params
        .tasks
        .iter()
        .flatten()
        .find(|id| !suite.tasks.iter().any(|task| &task.id == *id))
    {
        return Err(EvalError::Usage(format!(
            "--tasks names `{unknown}`, which is not a task of the suite"
        )));
    }
    params.profile.apply(&mut suite.world);
    for (param, value) in &params.overrides {
        param.apply(&mut suite.world, *value)?;
    }
    suite.check()?;
    Ok(suite)
}

/// Parses `one_shot,reactive,v1,v2`.
pub fn parse_strategies(list: &str) -> Result<Vec<Strategy>, EvalError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            serde_json::from_value::<Strategy>(json!(name))
                .ok()
                .filter(|s| *s != Strategy::Direct)
                .ok_or_else(|| EvalError::Strategy(name.to_string()))
        })
        .collect()
}

/// Opens the evaluation's store: the Postgres database given, or a fresh SQLite file under
/// the output directory; migrated.
pub async fn open_store(params: &EvalParams) -> Result<Arc<dyn Store>, EvalError> {
    let store: Arc<dyn Store> = match &params.database_url {
        Some(url) => Arc::new(cairn::store::postgres::PgStore::connect(url, 8).await?),
        None => {
            let path = params.out.join("eval.db");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            Arc::new(cairn::store::sqlite::SqliteStore::open(&path).await?)
        }
    };
    store.migrate().await?;
    Ok(store)
}

/// What makes this evaluation's runs one experiment (see [`super::resume`]); `tool_receipts`:
/// whether the world's tools are behind receipts ([`tool_receipts`]).
pub fn runs_meta(params: &EvalParams, suite: &Suite, tool_receipts: bool) -> RunsMeta {
    RunsMeta {
        suite: suite.name.clone(),
        model: model_name(params),
        simulated: params.live.is_none(),
        prompts: prompts::ALL.iter().map(|p| p.version()).collect(),
        world: serde_json::to_value(&suite.world).unwrap_or_default(),
        engine: serde_json::to_value(params.engine_settings()).unwrap_or_default(),
        tool_receipts,
    }
}

/// Whether this evaluation puts the world's tools behind receipts: always, except when it
/// resumes runs recorded before they were (which go on as they began).
pub fn tool_receipts(params: &EvalParams) -> Result<bool, EvalError> {
    if !params.resume {
        return Ok(true);
    }
    Ok(RunLog::recorded(&params.out)?.is_none_or(|meta| meta.tool_receipts))
}

fn model_name(params: &EvalParams) -> String {
    match &params.live {
        Some(LiveModel {
            model,
            live_for: Some(purposes),
            ..
        }) => {
            let names: Vec<&str> = purposes.iter().map(|p| p.as_str()).collect();
            format!(
                "{model} for {} calls only; the world's policy answers the others",
                names.join(", ")
            )
        }
        Some(live) => live.model.clone(),
        None => "cairn-eval world model (simulated)".into(),
    }
}

/// The matrix in order: (repeat, task, strategy), repeats outermost.
pub(super) fn matrix(params: &EvalParams, suite: &Suite) -> Vec<RunKey> {
    let mut keys = Vec::new();
    for repeat in 0..params.repeat.max(1) {
        let chosen = suite.tasks.iter().filter(|task| {
            params
                .tasks
                .as_ref()
                .is_none_or(|only| only.contains(&task.id))
        });
        for task in chosen {
            for strategy in &params.strategies {
                keys.push((task.id.clone(), strategy.as_str().to_string(), repeat));
            }
        }
    }
    keys
}

/// The matrix's records in matrix order: those `done` earlier, then those run now.
pub fn in_matrix_order(
    params: &EvalParams,
    suite: &Suite,
    done: Vec<Record>,
    ran: Vec<Record>,
) -> Vec<Record> {
    let mut by_key: BTreeMap<RunKey, Record> = done
        .into_iter()
        .chain(ran)
        .map(|r| (key_of(&r), r))
        .collect();
    matrix(params, suite)
        .into_iter()
        .filter_map(|key| by_key.remove(&key))
        .collect()
}

/// The part of the matrix a run is still owed: not in `done`.
pub struct Owed<'a> {
    pub done: &'a [Record],
    pub log: &'a RunLog,
}

/// Writes `report.md`, `report.json` and `chart.svg` under `out`; returns the Markdown.
pub fn write_reports(
    out: &Path,
    suite: &Suite,
    params: &EvalParams,
    records: &[Record],
) -> Result<String, EvalError> {
    let report = build_report(params, suite, records);
    let json = serde_json::to_string_pretty(&report).map_err(EvalError::json("report.json"))?;
    let markdown = report.markdown();
    for (name, text) in [
        ("report.json", json.as_str()),
        ("report.md", markdown.as_str()),
        ("chart.svg", report.svg().as_str()),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(EvalError::io(path.display()))?;
    }
    Ok(markdown)
}

/// The report of `records`, naming where the model answers came from and the prompt versions
/// the engine asked with.
fn build_report(params: &EvalParams, suite: &Suite, records: &[Record]) -> super::report::Report {
    let mut report =
        super::report::Report::build(suite, &params.strategies, params.repeat, records);
    report.simulated = params.live.is_none();
    report.profile = params.profile;
    report.model = model_name(params);
    report.prompts = prompts::ALL.iter().map(|p| p.version()).collect();
    report
}

/// Builds the report from the records, writes it under `out` and prints the summary.
pub fn conclude(
    params: &EvalParams,
    suite: &Suite,
    records: &[Record],
) -> Result<super::report::Report, EvalError> {
    let report = build_report(params, suite, records);
    write_reports(&params.out, suite, params, records)?;
    if params.progress {
        println!("\n{}", report.markdown());
        println!(
            "cairn eval: reports written to {}",
            params.out.join("report.md").display()
        );
    }
    Ok(report)
}
