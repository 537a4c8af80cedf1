//! Why a plan or a step list was refused, said the way it is sent back to the planner: short,
//! bounded, and naming what to change.

use std::fmt;

/// Longest text (ids, messages) echoed back inside an error.
const SHORT: usize = 120;

/// Truncates text for an error message on a character boundary.
pub fn short(text: &str) -> String {
    match text.char_indices().nth(SHORT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// Why a plan was refused. `Display` is the message sent back to the planner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{at}: {message}")]
    Malformed { at: String, message: String },
    #[error("the plan has no milestones; add at least one")]
    Empty,
    #[error("the plan has {count} milestones; use at most {max}")]
    TooManyMilestones { count: usize, max: usize },
    #[error("milestones[{index}] has an empty id; give every milestone a unique id")]
    EmptyId { index: usize },
    #[error("milestone id {id:?} is used more than once; ids must be unique")]
    DuplicateId { id: String },
    #[error("milestone {milestone} depends on itself; remove {milestone} from its depends_on")]
    SelfDependency { milestone: String },
    #[error("milestone {milestone} depends on unknown milestone {dependency:?}")]
    UnknownDependency {
        milestone: String,
        dependency: String,
    },
    #[error("dependency cycle {}; remove one of these dependencies", .path.join(" -> "))]
    Cycle {
        /// Each milestone depends on the next; the last repeats the first.
        path: Vec<String>,
    },
    #[error(
        "milestone {milestone} has no accept check; add one (artifact, schema, command, verifier or all)"
    )]
    MissingCheck { milestone: String },
    #[error("milestone {milestone} has an invalid accept check: {reason}")]
    InvalidCheck { milestone: String, reason: String },
    #[error("milestone {milestone} has no effort; give it a positive integer effort")]
    MissingEffort { milestone: String },
    #[error("milestone {milestone} has effort 0; effort must be a positive integer")]
    ZeroEffort { milestone: String },
    #[error("milestone {milestone} lists no tools; name the registered tools it may use")]
    NoTools { milestone: String },
    #[error("milestone {milestone} uses unknown tool {tool:?}; registered tools: {}", .registered.join(", "))]
    UnknownTool {
        milestone: String,
        tool: String,
        registered: Vec<String>,
    },
    #[error("milestone {milestone}'s command check uses unknown tool {tool:?}; registered tools: {}", .registered.join(", "))]
    UnknownCheckTool {
        milestone: String,
        tool: String,
        registered: Vec<String>,
    },
    #[error(
        "milestone {milestone}'s check names artifact {artifact:?}, which none of its tools produces; they produce: {}",
        .produced.join(", ")
    )]
    UndeclaredArtifact {
        milestone: String,
        artifact: String,
        /// What the milestone's tools declare they produce.
        produced: Vec<String>,
    },
    #[error(
        "finished milestone {milestone} changed its {field}; keep it unchanged in the new plan"
    )]
    RewroteDoneMilestone {
        milestone: String,
        field: &'static str,
    },
    #[error("finished milestone {milestone} cannot depend on unfinished milestone {dependency}")]
    DoneDependsOnUnfinished {
        milestone: String,
        dependency: String,
    },
}

/// Why a tactical step list was refused. `Display` is sent back to the tactical planner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("the step list is empty; propose at least one step")]
    Empty,
    #[error("{count} steps proposed; use at most {max}")]
    TooMany { count: usize, max: usize },
    #[error("steps[{index}] has an empty id")]
    EmptyId { index: usize },
    #[error("step id {id:?} is used more than once")]
    DuplicateId { id: String },
    #[error("step {step} uses tool {tool:?}, which this milestone does not allow; allowed: {}", .allowed.join(", "))]
    ToolNotAllowed {
        step: String,
        tool: String,
        allowed: Vec<String>,
    },
    #[error("step {step} args must be a JSON object")]
    ArgsNotObject { step: String },
}

/// Joins errors into one bounded message for the planner.
pub fn feedback<E: fmt::Display>(errors: &[E], max_errors: usize) -> String {
    let mut lines: Vec<String> = errors
        .iter()
        .take(max_errors)
        .enumerate()
        .map(|(i, e)| format!("{}. {}", i + 1, e))
        .collect();
    if errors.len() > max_errors {
        lines.push(format!("({} more not shown)", errors.len() - max_errors));
    }
    lines.join("\n")
}
