//! Every live model call stored whole (`cairn eval --live`): what was asked (purpose,
//! milestone, attempt, sampling, the prompt's version, the input, the turns, the answer
//! schema), what came back (the answer, or the error), what it cost (tokens, milliseconds) and
//! the world's verdict when it has one, one JSON line per call in `OUT/calls.jsonl`, appended
//! as the call ends, so a lost run can be read afterwards call by call (`cairn eval calls`,
//! [`read`], [`show`]). Each distinct prompt text is written once, to `OUT/prompts/<sha8>.md`.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::EvalError;
use crate::world::{Judged, World};
use cairn::domain::task::{Strategy, TaskId};
use cairn::engine::prompts;
use cairn::engine::runtime::ports::{
    FailureKind, ModelCall, ModelReply, PortError, Purpose, Sampling, Turn,
};

pub mod read;
#[cfg(test)]
mod read_tests;
pub mod show;
#[cfg(test)]
mod tests;

/// The log's file name under an evaluation's output directory.
pub const CALLS_FILE: &str = "calls.jsonl";
/// The folder of the prompt texts, one `<sha8>.md` each.
pub const PROMPTS_DIR: &str = "prompts";

/// One model call, whole: one line of `calls.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCall {
    /// The suite task (empty when the world could not bind the cairn task to one).
    pub task: String,
    pub repeat: u32,
    /// The run's strategy (`None` when the world could not bind the task).
    pub strategy: Option<Strategy>,
    /// The cairn task the call belongs to.
    pub task_id: TaskId,
    /// 1-based, per cairn task, in the order the calls ended.
    pub seq: u64,
    pub purpose: Purpose,
    pub milestone: Option<String>,
    pub attempt: u32,
    /// `endpoint` or `explore` (a warmer re-ask).
    pub sampling: String,
    /// The first 4 bytes of the SHA-256 of the prompt text, in hex (`prompts/<sha8>.md`).
    pub prompt_sha8: String,
    /// `name@sha8` when the text is one of the engine's prompts ([`prompts::Prompt::version`]).
    pub prompt_version: Option<String>,
    pub input: Value,
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// The answer's JSON Schema, as sent.
    pub schema: Option<Value>,
    pub answer: Answer,
    pub tokens: u64,
    pub latency_ms: u64,
    /// The world's verdict on the answer (what `trace.jsonl` gets), when it judged it.
    pub verdict: Option<Judged>,
}

impl StoredCall {
    /// The prompt's version as the reports name it, `?@sha8` for a text no prompt has now.
    pub fn version(&self) -> String {
        self.prompt_version
            .clone()
            .unwrap_or_else(|| format!("?@{}", self.prompt_sha8))
    }
}

/// What a call came back with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The model's JSON answer.
    Value(Value),
    /// No usable answer.
    Error { kind: FailureKind, message: String },
}

/// `sha8` of a prompt text: the hash part of [`prompts::Prompt::version`].
pub fn sha8(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// The writer of `calls.jsonl`: started anew unless resuming, appended to one whole line at a
/// time, so a killed evaluation keeps every call that ended.
pub struct CallLog {
    prompts: PathBuf,
    state: Mutex<LogState>,
}

struct LogState {
    file: std::fs::File,
    /// The last sequence number per cairn task.
    seqs: HashMap<TaskId, u64>,
    /// The prompt texts already under `prompts/`.
    written: HashSet<String>,
}

impl CallLog {
    /// Opens `out/calls.jsonl`: kept when `resume` (its sequence numbers go on), else emptied.
    pub fn open(out: &Path, resume: bool) -> Result<CallLog, EvalError> {
        let path = out.join(CALLS_FILE);
        let seqs = match resume && path.exists() {
            true => kept(&path)?,
            false => {
                std::fs::write(&path, b"").map_err(EvalError::io(path.display()))?;
                HashMap::new()
            }
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(EvalError::io(path.display()))?;
        let prompts = out.join(PROMPTS_DIR);
        std::fs::create_dir_all(&prompts).map_err(EvalError::io(prompts.display()))?;
        Ok(CallLog {
            prompts,
            state: Mutex::new(LogState {
                file,
                seqs,
                written: HashSet::new(),
            }),
        })
    }

    /// Stores `call` and what it came back with; a failure to write is logged, never the
    /// call's failure.
    pub async fn record(
        &self,
        world: &World,
        call: &ModelCall,
        reply: &Result<ModelReply, PortError>,
        latency: Duration,
        verdict: Option<&Judged>,
    ) {
        let run = world.run_of(call.task_id).await;
        let (answer, tokens) = match reply {
            Ok(reply) => (Answer::Value(reply.value.clone()), reply.tokens),
            Err(error) => (
                Answer::Error {
                    kind: error.kind,
                    message: error.message.clone(),
                },
                error.tokens,
            ),
        };
        let sha = sha8(&call.prompt);
        let mut stored = StoredCall {
            task: run.as_ref().map(|r| r.task.clone()).unwrap_or_default(),
            repeat: run.as_ref().map_or(0, |r| r.repeat),
            strategy: run.map(|r| r.strategy),
            task_id: call.task_id,
            seq: 0,
            purpose: call.purpose,
            milestone: call.milestone.clone(),
            attempt: call.attempt,
            sampling: match call.sampling {
                Sampling::Endpoint => "endpoint",
                Sampling::Explore => "explore",
            }
            .to_string(),
            prompt_version: prompts::ALL
                .iter()
                .find(|p| p.text == call.prompt)
                .map(|p| p.version()),
            prompt_sha8: sha,
            input: call.input.clone(),
            turns: call.turns.clone(),
            schema: call.schema.clone(),
            answer,
            tokens,
            latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            verdict: verdict.cloned(),
        };
        if let Err(error) = self.append(&mut stored, &call.prompt) {
            tracing::warn!(%error, "cannot store a model call in calls.jsonl");
        }
    }

    /// Numbers the call, writes its prompt text once and appends its line.
    fn append(&self, stored: &mut StoredCall, prompt: &str) -> Result<(), EvalError> {
        let mut state = lock(&self.state);
        if !state.written.contains(&stored.prompt_sha8) {
            self.write_prompt(&stored.prompt_sha8, prompt)?;
            state.written.insert(stored.prompt_sha8.clone());
        }
        let seq = state.seqs.entry(stored.task_id).or_insert(0);
        *seq += 1;
        stored.seq = *seq;
        let mut line = serde_json::to_vec(&stored).map_err(EvalError::json(CALLS_FILE))?;
        line.push(b'\n');
        state
            .file
            .write_all(&line)
            .and_then(|()| state.file.flush())
            .map_err(EvalError::io(CALLS_FILE))
    }

    /// `prompts/<sha8>.md`, written whole (a temporary file renamed), unless already there.
    fn write_prompt(&self, sha: &str, text: &str) -> Result<(), EvalError> {
        let path = self.prompts.join(format!("{sha}.md"));
        if path.exists() {
            return Ok(());
        }
        let partial = self.prompts.join(format!("{sha}.md.partial"));
        std::fs::write(&partial, text).map_err(EvalError::io(partial.display()))?;
        std::fs::rename(&partial, &path).map_err(EvalError::io(path.display()))
    }
}

/// The last sequence number per cairn task of the kept log at `path`, after cutting off a
/// last line a killed process left without its end (so what follows starts a line of its own).
fn kept(path: &Path) -> Result<HashMap<TaskId, u64>, EvalError> {
    #[derive(Deserialize)]
    struct Numbered {
        task_id: TaskId,
        seq: u64,
    }
    let text = std::fs::read_to_string(path).map_err(EvalError::io(path.display()))?;
    let whole = text.rfind('\n').map_or(0, |end| end + 1);
    if whole < text.len() {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(EvalError::io(path.display()))?;
        file.set_len(whole as u64)
            .map_err(EvalError::io(path.display()))?;
    }
    let mut seqs = HashMap::new();
    for numbered in text[..whole]
        .lines()
        .filter_map(|line| serde_json::from_str::<Numbered>(line).ok())
    {
        let seq = seqs.entry(numbered.task_id).or_insert(0);
        *seq = numbered.seq.max(*seq);
    }
    Ok(seqs)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `cairn eval calls`: the run `query` names in the log at `path` (a file, or an evaluation's
/// output folder), as text.
pub fn show_run(path: &Path, query: &read::Query, full: bool) -> Result<String, read::CallsError> {
    let (file, run) = read::load(path, query)?;
    let dir = file.parent().unwrap_or(Path::new("."));
    Ok(show::render(&run, dir, full))
}
