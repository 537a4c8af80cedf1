//! Why an evaluation stopped: a typed error that keeps the source of every I/O and JSON
//! failure, with the file or the record it was about.

use std::fmt::Display;

use cairn::store::StoreError;

use crate::suite::SuiteError;
use crate::sweep::SweepError;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Suite(#[from] SuiteError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}: a writer panicked while it held the run log")]
    Poisoned(String),
    #[error("HTTP API: {0}")]
    Api(String),
    #[error("strategy {0:?} cannot be evaluated (use one_shot, reactive, v1, v2, auto)")]
    Strategy(String),
    #[error(transparent)]
    Sweep(#[from] SweepError),
    #[error("cannot resume: {0}")]
    Resume(String),
    #[error("--live-purposes: unknown purpose {0:?} (use gate, strategic, tactical, verifier)")]
    Purpose(String),
    #[error("{0}")]
    Usage(String),
}

impl EvalError {
    /// Wraps an I/O error about `what` (a path, a report), for `map_err`.
    pub fn io(what: impl Display) -> impl FnOnce(std::io::Error) -> EvalError {
        let what = what.to_string();
        move |source| EvalError::Io { what, source }
    }

    /// Wraps a JSON error about `what`, for `map_err`.
    pub fn json(what: impl Display) -> impl FnOnce(serde_json::Error) -> EvalError {
        let what = what.to_string();
        move |source| EvalError::Json { what, source }
    }
}
