//! Reading stored calls back: `calls.jsonl`, or the same gzipped (`calls.jsonl.gz`, how a
//! baseline is committed), and picking one run (suite task, strategy, repeat) out of them.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use super::{CALLS_FILE, StoredCall};
use crate::error::EvalError;
use cairn::domain::task::Strategy;

/// Why stored calls cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum CallsError {
    #[error(transparent)]
    Read(#[from] EvalError),
    #[error(
        "no stored calls in {0}: it holds neither calls.jsonl nor calls.jsonl.gz (`cairn eval \
         --live` writes calls.jsonl)"
    )]
    NoLog(String),
    #[error("{0} does not exist")]
    Missing(String),
    #[error("{path}, line {line}: not a stored model call: {source}")]
    Line {
        path: String,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} holds no call of task {task:?}; {known}")]
    NoTask {
        path: String,
        task: String,
        known: String,
    },
    #[error(
        "{path} holds no run of task {task:?} with {wanted}; the runs of {task:?} there: {runs}"
    )]
    NoRun {
        path: String,
        task: String,
        wanted: String,
        runs: String,
    },
    #[error(
        "{path} holds {count} runs of task {task:?}: {runs}; pick one with --strategy and --repeat"
    )]
    Ambiguous {
        path: String,
        task: String,
        count: usize,
        runs: String,
    },
}

/// Which run to show: the suite task's, narrowed by strategy and repeat when given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    pub task: String,
    pub strategy: Option<Strategy>,
    pub repeat: Option<u32>,
}

/// One run's calls, in the log's order (several cairn tasks when an interrupted run was run
/// again after `--resume`).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub task: String,
    pub strategy: Option<Strategy>,
    pub repeat: u32,
    pub calls: Vec<StoredCall>,
}

/// The log at `path`: the file itself, or `calls.jsonl` (else `calls.jsonl.gz`) in the folder.
pub fn locate(path: &Path) -> Result<PathBuf, CallsError> {
    if !path.is_dir() {
        return match path.exists() {
            true => Ok(path.to_path_buf()),
            false => Err(CallsError::Missing(path.display().to_string())),
        };
    }
    let plain = path.join(CALLS_FILE);
    let gzipped = path.join(format!("{CALLS_FILE}.gz"));
    [plain, gzipped]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| CallsError::NoLog(path.display().to_string()))
}

/// The text of a log, ungzipped when it is gzipped (by its first bytes, whatever its name).
pub fn log_text(path: &Path) -> Result<String, EvalError> {
    let bytes = std::fs::read(path).map_err(EvalError::io(path.display()))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        MultiGzDecoder::new(bytes.as_slice())
            .read_to_string(&mut text)
            .map_err(EvalError::io(path.display()))?;
        return Ok(text);
    }
    String::from_utf8(bytes).map_err(|e| {
        EvalError::io(path.display())(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    })
}

/// Every stored call of the log at `path`. A last line without its end (a process killed as
/// it wrote) is left out; any other line that is not a stored call is an error.
pub fn read_log(path: &Path) -> Result<Vec<StoredCall>, CallsError> {
    let text = log_text(path)?;
    let mut calls = Vec::new();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let whole = line.ends_with('\n');
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(call) => calls.push(call),
            Err(_) if !whole => {}
            Err(source) => {
                return Err(CallsError::Line {
                    path: path.display().to_string(),
                    line: index + 1,
                    source,
                });
            }
        }
    }
    Ok(calls)
}

fn strategy_name(strategy: Option<Strategy>) -> &'static str {
    strategy.map_or("?", Strategy::as_str)
}

/// `strategy S, repeat N (K calls)`, one per run, in order.
fn listed(runs: &BTreeMap<(&'static str, u32), usize>) -> String {
    runs.iter()
        .map(|((strategy, repeat), calls)| {
            format!("strategy {strategy}, repeat {repeat} ({calls} calls)")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The one run of `calls` that `query` names, or why there is none (with the runs there are).
pub fn select(calls: Vec<StoredCall>, query: &Query, path: &Path) -> Result<Run, CallsError> {
    let path_text = path.display().to_string();
    if !calls.iter().any(|c| c.task == query.task) {
        return Err(CallsError::NoTask {
            path: path_text,
            task: query.task.clone(),
            known: tasks_of(&calls),
        });
    }
    let of_task: Vec<StoredCall> = calls.into_iter().filter(|c| c.task == query.task).collect();
    let mut runs: BTreeMap<(&'static str, u32), usize> = BTreeMap::new();
    for call in &of_task {
        *runs
            .entry((strategy_name(call.strategy), call.repeat))
            .or_default() += 1;
    }
    let wanted = |c: &StoredCall| {
        query.strategy.is_none_or(|s| c.strategy == Some(s))
            && query.repeat.is_none_or(|r| c.repeat == r)
    };
    let mut matching: BTreeMap<(&'static str, u32), usize> = BTreeMap::new();
    for call in of_task.iter().filter(|c| wanted(c)) {
        *matching
            .entry((strategy_name(call.strategy), call.repeat))
            .or_default() += 1;
    }
    let Some(((_, repeat), _)) = matching.first_key_value() else {
        let strategy = query.strategy.map(|s| format!("strategy {}", s.as_str()));
        let repeat = query.repeat.map(|r| format!("repeat {r}"));
        return Err(CallsError::NoRun {
            path: path_text,
            task: query.task.clone(),
            wanted: [strategy, repeat]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", "),
            runs: listed(&runs),
        });
    };
    if matching.len() > 1 {
        return Err(CallsError::Ambiguous {
            path: path_text,
            task: query.task.clone(),
            count: matching.len(),
            runs: listed(&matching),
        });
    }
    let repeat = *repeat;
    let calls: Vec<StoredCall> = of_task.into_iter().filter(|c| wanted(c)).collect();
    Ok(Run {
        task: query.task.clone(),
        strategy: calls.first().and_then(|c| c.strategy),
        repeat,
        calls,
    })
}

/// The tasks a log holds calls of, for the error that names none of them.
fn tasks_of(calls: &[StoredCall]) -> String {
    let mut tasks: Vec<&str> = calls.iter().map(|c| c.task.as_str()).collect();
    tasks.sort_unstable();
    tasks.dedup();
    match tasks.is_empty() {
        true => "it holds no calls at all".to_string(),
        false => format!("it holds calls of the tasks {}", tasks.join(", ")),
    }
}

/// Reads the log at `path` (a file or an evaluation's output folder) and picks `query`'s run.
pub fn load(path: &Path, query: &Query) -> Result<(PathBuf, Run), CallsError> {
    let file = locate(path)?;
    let run = select(read_log(&file)?, query, &file)?;
    Ok((file, run))
}
