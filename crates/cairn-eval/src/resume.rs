//! Resumable evaluations. A live suite on a local CPU model takes hours (about a minute per
//! run), longer than one sitting, so every finished run is appended to `runs.jsonl` under the
//! output directory the moment it is judged, and `cairn eval --resume` submits only the runs
//! of the matrix that file does not hold yet, then reports on all of them.
//!
//! Runs are comparable only when the same prompts asked the same model on the same suite:
//! `runs.meta.json` records those, and resuming with any of them changed is refused rather
//! than mixing two experiments in one report.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::error::EvalError;
use super::report::Record;

/// What makes the runs of one output directory one experiment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunsMeta {
    pub suite: String,
    pub model: String,
    pub simulated: bool,
    /// `Prompt::version` of every prompt the engine asks with.
    pub prompts: Vec<String>,
    /// The world's settings, overrides (`--sweep`) applied.
    pub world: serde_json::Value,
    /// The engine settings the runs used.
    #[serde(default)]
    pub engine: serde_json::Value,
    /// Whether the world's tools answered an identical side-effecting call from its first
    /// receipt, as a deployment's tool client does (`cairn::engine::runtime::receipted`).
    /// Runs recorded before receipts were added did not: every repeat reached the world, and a
    /// resume of them goes on without receipts, so one experiment stays one experiment.
    #[serde(default)]
    pub tool_receipts: bool,
}

/// The world settings only the simulated model's answers read (`crate::world::mind`):
/// the tools, receipts and faults a live run meets do not depend on them.
const POLICY_ONLY: [&str; 3] = ["slips", "guess_success", "gate_noise"];

impl RunsMeta {
    /// Whether `other` names the same experiment. A live run's answers come from the model, so
    /// the settings of the simulated policy alone ([`POLICY_ONLY`]: the slip rates, the chance
    /// of a right guess, the gate's noise) take no part in it: a live run recorded before they
    /// were calibrated (or before a rate existed) resumes after.
    pub fn same_experiment(&self, other: &RunsMeta) -> bool {
        let world = |meta: &RunsMeta| {
            let mut world = meta.world.clone();
            if !meta.simulated
                && let Some(map) = world.as_object_mut()
            {
                for key in POLICY_ONLY {
                    map.remove(key);
                }
            }
            world
        };
        self.suite == other.suite
            && self.model == other.model
            && self.simulated == other.simulated
            && self.prompts == other.prompts
            && same_engine(&self.engine, &other.engine)
            && self.tool_receipts == other.tool_receipts
            && world(self) == world(other)
    }
}

/// Engine settings compared key by key, a key one side lacks read as its default: a setting
/// added after a run began, at its default (the behaviour before it existed), is the same
/// experiment; any setting that differs is not.
fn same_engine(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let defaults = serde_json::to_value(cairn::domain::settings::EngineSettings::default())
        .unwrap_or_default();
    let value = |map: &serde_json::Map<String, serde_json::Value>, key: &str| {
        map.get(key).or_else(|| defaults.get(key)).cloned()
    };
    a.keys()
        .chain(b.keys())
        .all(|key| value(a, key) == value(b, key))
}

/// One run of the matrix: (suite task, strategy, repeat).
pub type RunKey = (String, String, u32);

/// The key of a finished run.
pub fn key_of(record: &Record) -> RunKey {
    (record.task.clone(), record.strategy.clone(), record.repeat)
}

/// The append-only log of finished runs of one output directory.
pub struct RunLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl RunLog {
    /// What `out` records of the experiment a resume would go on with: `None` when it holds no
    /// run log.
    pub fn recorded(out: &Path) -> Result<Option<RunsMeta>, EvalError> {
        if !out.join("runs.jsonl").exists() {
            return Ok(None);
        }
        let meta_path = out.join("runs.meta.json");
        let bytes = std::fs::read(&meta_path).map_err(EvalError::io(meta_path.display()))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(EvalError::json(meta_path.display()))
    }

    /// Opens `out/runs.jsonl`. Fresh (`resume == false`) truncates it and writes `meta`;
    /// resuming checks `meta` against the recorded one and returns the runs already finished.
    pub fn open(
        out: &Path,
        meta: &RunsMeta,
        resume: bool,
    ) -> Result<(RunLog, Vec<Record>), EvalError> {
        let path = out.join("runs.jsonl");
        let meta_path = out.join("runs.meta.json");
        let mut done = Vec::new();
        let recorded = if resume { Self::recorded(out)? } else { None };
        if let Some(recorded) = recorded {
            if !recorded.same_experiment(meta) {
                return Err(EvalError::Resume(format!(
                    "{} holds runs of another experiment (suite {:?}, model {:?}, {} prompts, \
                     simulated {}, tool receipts {}, world {}); resume only with the same suite, \
                     world, engine settings, model, prompts and tool receipts, or use a new --out",
                    out.display(),
                    recorded.suite,
                    recorded.model,
                    recorded.prompts.len(),
                    recorded.simulated,
                    recorded.tool_receipts,
                    recorded.world
                )));
            }
            drop_partial_line(&path)?;
            done = read_runs(&path)?;
        } else {
            let json = serde_json::to_vec_pretty(meta).map_err(EvalError::json("the run meta"))?;
            std::fs::write(&meta_path, json).map_err(EvalError::io(meta_path.display()))?;
            std::fs::write(&path, b"").map_err(EvalError::io(path.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(EvalError::io(path.display()))?;
        Ok((
            RunLog {
                path,
                file: Mutex::new(file),
            },
            done,
        ))
    }

    /// Appends one finished run (one line, flushed to the file before returning).
    pub fn append(&self, record: &Record) -> Result<(), EvalError> {
        let mut line = serde_json::to_vec(record).map_err(EvalError::json("a run record"))?;
        line.push(b'\n');
        let mut file = self
            .file
            .lock()
            .map_err(|_| EvalError::Poisoned(self.path.display().to_string()))?;
        file.write_all(&line)
            .map_err(EvalError::io(self.path.display()))?;
        file.flush().map_err(EvalError::io(self.path.display()))
    }
}

/// Cuts a last line left unfinished by a killed process, so that the next append starts on a
/// line of its own (that run is simply run again).
fn drop_partial_line(path: &Path) -> Result<(), EvalError> {
    let io = || EvalError::io(path.display());
    let bytes = std::fs::read(path).map_err(io())?;
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |at| at + 1);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io())?;
    file.set_len(keep as u64).map_err(io())
}

/// The runs recorded in `path`; an unreadable line is an error.
fn read_runs(path: &Path) -> Result<Vec<Record>, EvalError> {
    let file = std::fs::File::open(path).map_err(EvalError::io(path.display()))?;
    let lines: Vec<String> = std::io::BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(EvalError::io(path.display()))?;
    let mut runs = Vec::new();
    let mut seen = BTreeSet::new();
    for (number, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            // A run recorded twice (two resumes racing) counts once.
            Ok(record) => {
                if seen.insert(key_of(&record)) {
                    runs.push(record);
                }
            }
            Err(e) => {
                return Err(EvalError::Resume(format!(
                    "{} line {}: {e}",
                    path.display(),
                    number + 1
                )));
            }
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> RunsMeta {
        RunsMeta {
            suite: "s".into(),
            model: "m".into(),
            simulated: false,
            prompts: vec!["tactical@1".into()],
            world: serde_json::json!({"seed": 7}),
            engine: serde_json::json!({"max_parallel": 4}),
            tool_receipts: true,
        }
    }

    fn record(task: &str) -> Record {
        serde_json::from_value(serde_json::json!({
            "task": task, "category": "c", "fault": null, "strategy": "v2", "repeat": 0,
            "status": "succeeded", "verified": true, "tokens": 1, "tool_calls": 1,
            "model_calls": 1, "wall_ms": 1, "repairs": {}, "gate": null, "fault_fired": false,
            "recovered": null, "repeated_side_effects": 0,
        }))
        .unwrap()
    }

    #[test]
    fn a_resumed_log_returns_its_runs_and_refuses_another_experiment() {
        let dir = tempfile::tempdir().unwrap();
        let (log, done) = RunLog::open(dir.path(), &meta(), false).unwrap();
        assert!(done.is_empty());
        log.append(&record("a")).unwrap();
        log.append(&record("b")).unwrap();
        log.append(&record("a")).unwrap();
        drop(log);
        // A process killed mid-line leaves a partial last line: dropped, not an error.
        let path = dir.path().join("runs.jsonl");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"task\": \"c\", \"categ");
        std::fs::write(&path, text).unwrap();
        let (log, done) = RunLog::open(dir.path(), &meta(), true).unwrap();
        let tasks: Vec<&str> = done.iter().map(|r| r.task.as_str()).collect();
        assert_eq!(tasks, ["a", "b"]);
        log.append(&record("c")).unwrap();
        drop(log);
        let (_, done) = RunLog::open(dir.path(), &meta(), true).unwrap();
        assert_eq!(done.len(), 3);

        let mut other = meta();
        other.prompts = vec!["tactical@2".into()];
        let refused = RunLog::open(dir.path(), &other, true).err().unwrap();
        assert!(
            refused.to_string().contains("another experiment"),
            "{refused}"
        );

        // Runs recorded before the world's tools had receipts (no such key) are another
        // experiment for a build that has them.
        let mut before: serde_json::Value = serde_json::to_value(meta()).unwrap();
        before.as_object_mut().unwrap().remove("tool_receipts");
        let before: RunsMeta = serde_json::from_value(before).unwrap();
        assert!(!before.tool_receipts);
        assert!(!before.same_experiment(&meta()));

        // Not resuming starts over.
        let (_, done) = RunLog::open(dir.path(), &other, false).unwrap();
        assert!(done.is_empty());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }

    #[test]
    fn policy_settings_take_no_part_in_a_live_experiment_but_do_in_a_simulated_one() {
        let mut live = meta();
        live.world = serde_json::json!({"seed": 7, "slips": {"invent_base": 0.0}});
        let mut calibrated = live.clone();
        calibrated.world = serde_json::json!({"seed": 7, "slips": {"invent_base": 0.9}});
        assert!(live.same_experiment(&calibrated));
        // So do the chance of a right guess and the gate's noise, read only by the policy.
        let mut guessing = calibrated.clone();
        guessing.world = serde_json::json!({"seed": 7, "guess_success": 0.0, "gate_noise": 2});
        assert!(live.same_experiment(&guessing));
        let mut reseeded = calibrated.clone();
        reseeded.world = serde_json::json!({"seed": 8, "slips": {"invent_base": 0.9}});
        assert!(!live.same_experiment(&reseeded));
        // A setting added later, at its default, is the same experiment; at another value not.
        let mut older = calibrated.clone();
        older.engine = serde_json::json!({});
        let mut newer = calibrated.clone();
        newer.engine = serde_json::json!({"explore_repeats": false});
        assert!(older.same_experiment(&newer));
        newer.engine = serde_json::json!({"explore_repeats": true});
        assert!(!older.same_experiment(&newer));
        let (mut sim, mut sim_calibrated) = (live, calibrated);
        sim.simulated = true;
        sim_calibrated.simulated = true;
        assert!(!sim.same_experiment(&sim_calibrated));
    }
}
