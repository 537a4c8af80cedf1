//! Task suites as files: `DIR/suite.toml` holds the simulated world's settings and the tasks.
//!
//! A task is a goal plus the ground truth of the simulated environment it runs in: the tool
//! calls that achieve it (`steps`, in order), the facts each call reveals, the injected fault,
//! and what the acceptance check demands. The format is documented in `docs/evaluation.md`.
//! Everything is checked at load, so a typo fails `cairn eval` before any task runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

mod check;

/// A loaded suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub world: WorldSettings,
    /// What each tool does and what its arguments mean, as a model is shown them under
    /// `--live` (`[tools.NAME]`); a tool or argument not documented here gets a generic line.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolDoc>,
    pub tasks: Vec<SuiteTask>,
}

/// A world tool as an operator would document it for a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDoc {
    pub description: String,
    /// Argument name -> what to send.
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    /// Whether a call changes the world. A tool some step uses writes when that step does; this
    /// says it for a tool no step uses (a distractor offered beside a task's own tools).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub side_effects: bool,
    /// Whether the tool declares the artifact its answers carry (named after the tool), as a
    /// registered tool may; without it the tool declares none, as an MCP tool would.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declares_artifact: bool,
}

/// The simulator behaviour that decides results: explicit, seeded, the same for every
/// strategy (see `docs/evaluation.md`, "The simulated world").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldSettings {
    /// Seed of every pseudo-random draw.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Probability that an argument written before the fact it needs is known is right anyway.
    #[serde(default = "default_guess")]
    pub guess_success: f64,
    /// Token cost model of the simulated model: a fixed part per call ...
    #[serde(default = "default_call_tokens")]
    pub tokens_per_call: u64,
    /// ... plus one token per this many characters of input and of output.
    #[serde(default = "default_chars")]
    pub chars_per_token: u64,
    /// How far off the model's estimate of a goal's tool calls (a gate feature) may be: the
    /// estimate is the true count plus a seeded draw uniform in `-gate_noise..=gate_noise`
    /// (never below 0). 0 gives the gate the ground truth.
    #[serde(default = "default_gate_noise")]
    pub gate_noise: u32,
    /// Rule 8: a model losing track (`[world.slips]`; none by default).
    #[serde(default)]
    pub slips: SlipRates,
    /// Whether the world's tools declare the artifacts they produce, as an operator may
    /// (`artifacts` of a registered tool): each declares one, named after the tool, which its
    /// answers carry beside the step's own. Off by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declare_artifacts: bool,
}

fn default_seed() -> u64 {
    7
}
fn default_guess() -> f64 {
    0.5
}
fn default_call_tokens() -> u64 {
    300
}
fn default_chars() -> u64 {
    4
}
fn default_gate_noise() -> u32 {
    1
}

impl Default for WorldSettings {
    fn default() -> Self {
        Self {
            seed: default_seed(),
            guess_success: default_guess(),
            tokens_per_call: default_call_tokens(),
            chars_per_token: default_chars(),
            gate_noise: default_gate_noise(),
            slips: Default::default(),
            declare_artifacts: false,
        }
    }
}

pub use super::slip_rates::SlipRates;

/// Which model the simulated world plays: the one the suite's `[world.slips]` describe (for the
/// default suites, rates fitted to a small real model's mistakes), or a competent one that never
/// slips, on which the engine's mechanisms are tested when the model does its part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    #[default]
    Suite,
    Competent,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Suite => "suite",
            Profile::Competent => "competent",
        }
    }

    /// The world settings of this profile.
    pub fn apply(self, world: &mut WorldSettings) {
        if self == Profile::Competent {
            world.slips = SlipRates::default();
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(text: &str) -> Result<Profile, String> {
        match text {
            "suite" => Ok(Profile::Suite),
            "competent" => Ok(Profile::Competent),
            other => Err(format!(
                "unknown world profile {other:?} (use suite, the suite's own slip rates, or \
                 competent, no slips)"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Simple,
    Medium,
    Uncertain,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Simple => "simple",
            Category::Medium => "medium",
            Category::Uncertain => "uncertain",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteTask {
    pub id: String,
    pub category: Category,
    pub goal: String,
    /// What the final answer must contain, with `{fact}` references; required for tasks
    /// without steps (those are answered from knowledge).
    #[serde(default)]
    pub answer: Option<String>,
    #[serde(default)]
    pub steps: Vec<TaskStep>,
    #[serde(default)]
    pub fault: Option<FaultSpec>,
    /// The tools the task is offered (sent as the task's `tools`): its steps' tools and a few
    /// distractors. Absent, every tool of the suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Targets the goal names (a gate feature).
    #[serde(default = "one")]
    pub targets: u32,
    #[serde(default = "default_budget")]
    pub budget_tokens: u64,
}

fn one() -> u32 {
    1
}
fn default_budget() -> u64 {
    120_000
}

/// One tool call of the ground truth. `args` values may contain `{fact}` references to facts
/// revealed by earlier steps; `phase` groups steps into the milestones a good plan would have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskStep {
    pub id: String,
    pub tool: String,
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    #[serde(default)]
    pub reveals: BTreeMap<String, String>,
    #[serde(default)]
    pub writes: bool,
    #[serde(default)]
    pub phase: Option<String>,
    /// Earlier steps that must have happened before this one can (besides those revealing the
    /// facts it uses): the world refuses a step whose prerequisites have not happened.
    #[serde(default)]
    pub after: Vec<String>,
}

impl TaskStep {
    pub fn phase(&self) -> &str {
        self.phase.as_deref().unwrap_or(&self.id)
    }
}

impl SuiteTask {
    /// The steps that must have happened before `step`: its `after` list and the earlier
    /// steps revealing the facts its arguments use.
    pub fn prerequisites(&self, step: &TaskStep) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = step.after.iter().cloned().collect();
        let used: BTreeSet<String> = step.args.values().flat_map(|v| fact_refs(v)).collect();
        let earlier = self.steps.iter().take_while(|s| s.id != step.id);
        for source in earlier.filter(|s| s.reveals.keys().any(|k| used.contains(k))) {
            out.insert(source.id.clone());
        }
        out
    }
}

/// The injected failure classes (docs/evaluation.md, "Suites": one remedy per class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    MissingFile,
    ToolTimeout,
    UnexpectedResponse,
    InvalidIntermediate,
    ResourceDisappears,
    IncompleteEvidence,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::MissingFile => "missing_file",
            FaultKind::ToolTimeout => "tool_timeout",
            FaultKind::UnexpectedResponse => "unexpected_response",
            FaultKind::InvalidIntermediate => "invalid_intermediate",
            FaultKind::ResourceDisappears => "resource_disappears",
            FaultKind::IncompleteEvidence => "incomplete_evidence",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// The step it hits.
    pub step: String,
    /// `resource_disappears`: the fact that goes stale (revealed by an earlier step).
    #[serde(default)]
    pub fact: Option<String>,
    /// `tool_timeout`: how many calls time out before one answers (default 1).
    #[serde(default)]
    pub times: Option<u32>,
    /// When the fault fires: after the step's exact arguments (the default), or on any call
    /// of the step's tool, its answer stating the remedy.
    #[serde(default, skip_serializing_if = "FaultFires::is_default")]
    pub fires: FaultFires,
}

/// When an injected fault fires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultFires {
    /// On a call with the step's right arguments, until the remedy is applied: a model must
    /// first get the call right to meet the fault.
    #[default]
    AfterArgs,
    /// On any call of the step's tool until the remedy is applied, whatever the other
    /// arguments; the answer names the remedy (an argument the tool takes, or what to call).
    AnyArgs,
}

impl FaultFires {
    fn is_default(&self) -> bool {
        *self == FaultFires::AfterArgs
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("cannot read suite {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("suite {path}: {message}")]
    Parse { path: String, message: String },
    #[error("suite task {task}: {message}")]
    Invalid { task: String, message: String },
}

impl Suite {
    /// Loads `DIR/suite.toml` (or a `.toml` file given directly) and checks it.
    pub fn load(path: &Path) -> Result<Suite, SuiteError> {
        let file = if path.is_dir() {
            path.join("suite.toml")
        } else {
            path.to_path_buf()
        };
        let shown = file.display().to_string();
        let text = std::fs::read_to_string(&file).map_err(|source| SuiteError::Read {
            path: shown.clone(),
            source,
        })?;
        let suite: Suite = toml::from_str(&text).map_err(|error| SuiteError::Parse {
            path: shown,
            message: error.to_string(),
        })?;
        suite.check()?;
        Ok(suite)
    }

    pub fn task(&self, id: &str) -> Option<&SuiteTask> {
        self.tasks.iter().find(|t| t.id == id)
    }
}

/// The `{fact}` names referenced in a template.
pub fn fact_refs(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) => {
                out.push(after[..end].to_string());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}
