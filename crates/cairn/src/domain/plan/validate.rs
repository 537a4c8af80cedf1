//! Plan validation: a plan is checked by the runtime before anything runs.
//!
//! A model's plan is a hypothesis, so correctness that can be decided mechanically (ids,
//! dependencies, cycles, checks, budget shares, registered tools) is decided here rather than
//! trusted. Errors are short and say what to change, because they are sent back to the planner
//! verbatim (bounded by [`PlanLimits::max_errors`] and [`super::error::feedback`]).
//!
//! Three gates live here: [`validate`] for a strategic plan, [`validate_steps`] for a tactical
//! step list, and [`carry_over`] for an L3 replan, which must keep every finished milestone.

use super::error::{PlanError, StepError, short};
use super::known::KnownTools;
use super::{Milestone, MilestoneStatus, Plan, Step};
use std::collections::{BTreeMap, BTreeSet};

mod carry;

pub use carry::carry_over;

/// Bounds on what a planner may propose and on how much is said back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanLimits {
    pub max_milestones: usize,
    pub max_steps: usize,
    pub max_errors: usize,
}

impl Default for PlanLimits {
    fn default() -> Self {
        Self {
            max_milestones: 20,
            max_steps: 20,
            max_errors: 10,
        }
    }
}

/// Validates a strategic plan with the default [`PlanLimits`].
pub fn validate(plan: &Plan, tools: &KnownTools) -> Result<(), Vec<PlanError>> {
    validate_with(plan, tools, &PlanLimits::default())
}

/// Validates a strategic plan: at least one and at most `max_milestones` milestones, unique
/// non-empty ids, known dependencies without self-references or cycles, a well-formed check and
/// a positive effort on every milestone, and only registered tools. At most `max_errors` errors.
pub fn validate_with(
    plan: &Plan,
    tools: &KnownTools,
    limits: &PlanLimits,
) -> Result<(), Vec<PlanError>> {
    let mut errors = Vec::new();
    if plan.milestones.is_empty() {
        errors.push(PlanError::Empty);
    }
    if plan.milestones.len() > limits.max_milestones {
        errors.push(PlanError::TooManyMilestones {
            count: plan.milestones.len(),
            max: limits.max_milestones,
        });
    }
    let mut seen = BTreeSet::new();
    for (index, m) in plan.milestones.iter().enumerate() {
        if m.id.trim().is_empty() {
            errors.push(PlanError::EmptyId { index });
        } else if !seen.insert(m.id.as_str()) {
            errors.push(PlanError::DuplicateId { id: short(&m.id) });
        }
    }
    for m in &plan.milestones {
        milestone_errors(m, &seen, tools, &mut errors);
    }
    errors.extend(find_cycles(plan, limits.max_errors));
    if errors.is_empty() {
        Ok(())
    } else {
        errors.truncate(limits.max_errors.max(1));
        Err(errors)
    }
}

fn milestone_errors(
    m: &Milestone,
    ids: &BTreeSet<&str>,
    tools: &KnownTools,
    errors: &mut Vec<PlanError>,
) {
    let id = short(&m.id);
    for dep in &m.depends_on {
        if dep == &m.id {
            errors.push(PlanError::SelfDependency {
                milestone: id.clone(),
            });
        } else if !ids.contains(dep.as_str()) {
            errors.push(PlanError::UnknownDependency {
                milestone: id.clone(),
                dependency: short(dep),
            });
        }
    }
    if m.effort == 0 {
        errors.push(PlanError::ZeroEffort {
            milestone: id.clone(),
        });
    }
    if m.tools.is_empty() {
        errors.push(PlanError::NoTools {
            milestone: id.clone(),
        });
    }
    for tool in &m.tools {
        if !tools.contains(tool) {
            errors.push(PlanError::UnknownTool {
                milestone: id.clone(),
                tool: short(tool),
                registered: tools.sample(),
            });
        }
    }
    for reason in m.accept.problems() {
        errors.push(PlanError::InvalidCheck {
            milestone: id.clone(),
            reason,
        });
    }
    // A finished milestone is kept as it was (`carry_over`), even if its tools' declarations
    // changed since: only unfinished ones are held to them.
    let held = m.status != MilestoneStatus::Done;
    for artifact in m.accept.artifact_names().into_iter().filter(|_| held) {
        if let Some(produced) = tools.undeclared(artifact, &m.tools) {
            errors.push(PlanError::UndeclaredArtifact {
                milestone: id.clone(),
                artifact: short(artifact),
                produced,
            });
        }
    }
    for tool in m.accept.command_tools() {
        if !tool.trim().is_empty() && !tools.contains(tool) {
            errors.push(PlanError::UnknownCheckTool {
                milestone: id.clone(),
                tool: short(tool),
                registered: tools.sample(),
            });
        }
    }
}

/// Depth-first search over "depends on" edges; every back edge closes a cycle, reported as the
/// path from the milestone it returns to. Self and unknown edges are reported elsewhere.
fn find_cycles(plan: &Plan, max: usize) -> Vec<PlanError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Finished,
    }
    let index: BTreeMap<&str, usize> = plan
        .milestones
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let edges: Vec<Vec<usize>> = plan
        .milestones
        .iter()
        .map(|m| {
            m.depends_on
                .iter()
                .filter(|d| **d != m.id)
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    let mut marks = vec![Mark::New; edges.len()];
    let mut cycles = Vec::new();
    for root in 0..edges.len() {
        if marks[root] != Mark::New {
            continue;
        }
        // Iterative DFS: (node, next edge to follow); `stack` doubles as the current path.
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        marks[root] = Mark::OnStack;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&dep) = edges[node].get(*next) {
                *next += 1;
                match marks[dep] {
                    Mark::New => {
                        marks[dep] = Mark::OnStack;
                        stack.push((dep, 0));
                    }
                    Mark::OnStack if cycles.len() < max => {
                        let start = stack.iter().position(|&(n, _)| n == dep).unwrap_or(0);
                        let mut path: Vec<String> = stack[start..]
                            .iter()
                            .map(|&(n, _)| short(&plan.milestones[n].id))
                            .collect();
                        path.push(short(&plan.milestones[dep].id));
                        cycles.push(PlanError::Cycle { path });
                    }
                    _ => {}
                }
            } else {
                marks[node] = Mark::Finished;
                stack.pop();
            }
        }
    }
    cycles
}

/// Validates a tactical step list for `milestone`: non-empty, bounded, unique ids, object args,
/// and only tools the milestone allows.
pub fn validate_steps(
    steps: &[Step],
    milestone: &Milestone,
    limits: &PlanLimits,
) -> Result<(), Vec<StepError>> {
    let mut errors = Vec::new();
    if steps.is_empty() {
        errors.push(StepError::Empty);
    }
    if steps.len() > limits.max_steps {
        errors.push(StepError::TooMany {
            count: steps.len(),
            max: limits.max_steps,
        });
    }
    let mut seen = BTreeSet::new();
    for (index, step) in steps.iter().enumerate() {
        if step.id.trim().is_empty() {
            errors.push(StepError::EmptyId { index });
        } else if !seen.insert(step.id.as_str()) {
            errors.push(StepError::DuplicateId {
                id: short(&step.id),
            });
        }
        if !milestone.tools.contains(&step.tool) {
            errors.push(StepError::ToolNotAllowed {
                step: short(&step.id),
                tool: short(&step.tool),
                allowed: milestone.tools.iter().take(10).cloned().collect(),
            });
        }
        if !step.args.is_object() {
            errors.push(StepError::ArgsNotObject {
                step: short(&step.id),
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        errors.truncate(limits.max_errors.max(1));
        Err(errors)
    }
}

#[cfg(test)]
mod tests;
