//! Checking a loaded suite, so a typo fails `cairn eval` before any task runs.

use std::collections::BTreeSet;

use super::{FaultKind, Suite, SuiteError, SuiteTask, fact_refs};
use crate::world::LOCATE;

impl Suite {
    /// Unique ids, facts revealed before use, faults on known steps, answers where needed.
    pub fn check(&self) -> Result<(), SuiteError> {
        let mut ids = BTreeSet::new();
        if !(0.0..=1.0).contains(&self.world.guess_success) {
            return Err(invalid("world", "guess_success must be within 0..=1"));
        }
        if !self.world.slips.valid() {
            return Err(invalid(
                "world.slips",
                "every slip rate must be within 0..=1",
            ));
        }
        for task in &self.tasks {
            if !ids.insert(task.id.as_str()) {
                return Err(invalid(&task.id, "duplicate task id"));
            }
            if task.steps.is_empty() && task.answer.is_none() {
                return Err(invalid(&task.id, "a task without steps needs an answer"));
            }
            let mut known: BTreeSet<&str> = BTreeSet::new();
            let mut steps = BTreeSet::new();
            for step in &task.steps {
                if !steps.insert(step.id.as_str()) {
                    return Err(invalid(&task.id, &format!("duplicate step {}", step.id)));
                }
                for value in step.args.values() {
                    for fact in fact_refs(value) {
                        if !known.contains(fact.as_str()) {
                            return Err(invalid(
                                &task.id,
                                &format!(
                                    "step {} uses {{{fact}}} before a step reveals it",
                                    step.id
                                ),
                            ));
                        }
                    }
                }
                if let Some(unknown) = step
                    .after
                    .iter()
                    .find(|a| **a == step.id || !steps.contains(a.as_str()))
                {
                    return Err(invalid(
                        &task.id,
                        &format!("step {} is after {unknown}, not an earlier step", step.id),
                    ));
                }
                known.extend(step.reveals.keys().map(String::as_str));
            }
            self.check_tools(task)?;
            if let Some(fault) = &task.fault {
                if !steps.contains(fault.step.as_str()) {
                    return Err(invalid(
                        &task.id,
                        &format!("fault on unknown step {}", fault.step),
                    ));
                }
                if fault.kind == FaultKind::ResourceDisappears
                    && !fault.fact.as_deref().is_some_and(|f| known.contains(f))
                {
                    return Err(invalid(
                        &task.id,
                        "resource_disappears needs a revealed `fact`",
                    ));
                }
            }
        }
        Ok(())
    }

    /// A task's own tool list offers every tool its steps use (and `locate` where a missing
    /// file is its remedy), each documented under `[tools.NAME]` unless a step uses it.
    fn check_tools(&self, task: &SuiteTask) -> Result<(), SuiteError> {
        let Some(tools) = &task.tools else {
            return Ok(());
        };
        let offered: BTreeSet<&str> = tools.iter().map(String::as_str).collect();
        if offered.len() != tools.len() {
            return Err(invalid(&task.id, "`tools` lists a tool more than once"));
        }
        if let Some(step) = task
            .steps
            .iter()
            .find(|s| !offered.contains(s.tool.as_str()))
        {
            return Err(invalid(
                &task.id,
                &format!(
                    "`tools` does not offer {}, which step {} uses",
                    step.tool, step.id
                ),
            ));
        }
        let locates = task
            .fault
            .as_ref()
            .is_some_and(|f| f.kind == FaultKind::MissingFile);
        if locates && !offered.contains(LOCATE) {
            return Err(invalid(
                &task.id,
                "a missing_file fault needs `locate` offered",
            ));
        }
        let used: BTreeSet<&str> = self
            .tasks
            .iter()
            .flat_map(|t| t.steps.iter().map(|s| s.tool.as_str()))
            .collect();
        let undocumented = offered
            .iter()
            .find(|t| **t != LOCATE && !used.contains(*t) && !self.tools.contains_key(**t));
        match undocumented {
            Some(tool) => Err(invalid(
                &task.id,
                &format!(
                    "`tools` offers {tool}, which no step uses and [tools.{tool}] does not document"
                ),
            )),
            None => Ok(()),
        }
    }
}

fn invalid(task: &str, message: &str) -> SuiteError {
    SuiteError::Invalid {
        task: task.to_string(),
        message: message.to_string(),
    }
}
