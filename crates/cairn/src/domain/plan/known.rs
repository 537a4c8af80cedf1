//! What plan validation knows of the registered tools: their names and, where the operator
//! declared them, the artifacts each produces.

use std::collections::{BTreeMap, BTreeSet};

/// The names of the tools an operator registered (planners may only use these) and the
/// artifacts each declares it produces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownTools {
    names: BTreeSet<String>,
    artifacts: BTreeMap<String, BTreeSet<String>>,
}

impl KnownTools {
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            names: names.into_iter().map(Into::into).collect(),
            artifacts: BTreeMap::new(),
        }
    }

    /// The same tools, with the artifacts each declares (`(tool, names)`; a tool declaring
    /// none may be left out).
    pub fn with_artifacts<I, N>(mut self, declared: I) -> Self
    where
        I: IntoIterator<Item = (String, N)>,
        N: IntoIterator<Item = String>,
    {
        for (tool, names) in declared {
            let names: BTreeSet<String> = names.into_iter().collect();
            if !names.is_empty() {
                self.artifacts.entry(tool).or_default().extend(names);
            }
        }
        self
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Up to ten names, for an error message that tells the planner what it may use.
    pub(super) fn sample(&self) -> Vec<String> {
        self.names.iter().take(10).cloned().collect()
    }

    /// `None` when a check of a milestone granted `granted` may name `artifact`: some granted
    /// tool declares no artifacts (nothing is known of what it names them), or one declares
    /// it. Otherwise what the granted tools declare, for the planner to choose from.
    pub(super) fn undeclared(&self, artifact: &str, granted: &[String]) -> Option<Vec<String>> {
        if granted.is_empty() || self.declares_nothing(granted) || self.declares(artifact, granted)
        {
            return None;
        }
        let produced: BTreeSet<&String> = granted
            .iter()
            .filter_map(|tool| self.artifacts.get(tool))
            .flatten()
            .collect();
        Some(produced.into_iter().take(10).cloned().collect())
    }

    /// Whether some tool in `granted` declares that it produces `artifact`.
    pub fn declares(&self, artifact: &str, granted: &[String]) -> bool {
        granted
            .iter()
            .filter_map(|tool| self.artifacts.get(tool))
            .any(|names| names.contains(artifact))
    }

    /// Whether some tool in `granted` declares no artifacts: nothing is known of what it
    /// produces.
    pub fn declares_nothing(&self, granted: &[String]) -> bool {
        granted.iter().any(|t| !self.artifacts.contains_key(t))
    }
}
