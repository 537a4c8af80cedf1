//! The goal-level verifier: plan completion is not goal completion (all steps done, goal unmet).
//!
//! After every milestone passed, the verifier model judges the goal itself from the finished
//! plan, the checks' evidence and the artifacts. Its verdict is recorded as a
//! `verifier.decided` event and decides whether the task's result says `verified`.
//!
//! Programmatic evidence comes first: every target the goal names after a target noun ("services
//! A and B", "service C"; [`goal_targets`]) must appear in the arguments of a successful tool
//! call. A goal with a named target no call touched is not met, whatever a model would say, and
//! the model is not asked (`evidence: "programmatic"`). Free text does not touch a target: a
//! note's body that says "service A" acts on no service A (the real 1.5B model wrote such a note
//! to the wrong owner), so message-like fields and sentences are not read for targets. Once a
//! person's constraint was raised (steering), the goal may have been narrowed and the rule gives
//! way to the model, which is shown every raised constraint.

use serde_json::{Value, json};

use crate::domain::event::kinds::VERIFIER_DECIDED;
use crate::domain::gate::goal_targets;
use crate::domain::plan::check::{Check, parse_verdict};
use crate::domain::plan::{MilestoneStatus, StepStatus};
use crate::domain::repair::ConstraintSource;
use crate::engine::Halt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::attempt::{Attempt, brief};
use crate::engine::runtime::checkpoint::{Phase, Record, TaskState};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::Purpose;
use crate::engine::{prompts, schemas};

/// The goal verdict: `Some(true|false)` from the model, `None` when it could not answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub verified: Option<bool>,
    pub reason: String,
    pub seq: i64,
}

/// Asks the verifier about the goal. `attempt` distinguishes re-verifications after a replan.
pub async fn verify_goal(
    cx: &Attempt,
    milestone: Option<&str>,
    evidence: Value,
) -> Result<Verdict, Halt> {
    let snapshot = cx.journal.snapshot().await;
    let attempt = snapshot.metrics.repairs_replan_strategy + 1;
    // The targets are read from the goal as it was submitted; a person's constraint may have
    // narrowed it since ("only service A"), which no rule over the goal's words can know.
    let narrowed = snapshot
        .ladder
        .constraints
        .iter()
        .any(|c| matches!(c.source, ConstraintSource::Person { .. }));
    let untouched = untouched_targets(&cx.task().goal, &snapshot);
    if !untouched.is_empty() && !narrowed {
        return programmatic_fail(cx, &untouched, attempt).await;
    }
    let mut input = json!({
        "goal": cx.task().goal,
        "plan": snapshot.plan,
        "artifacts": brief(&json!(snapshot.artifacts), 12000),
        "evidence": evidence,
    });
    if !snapshot.ladder.constraints.is_empty() {
        input["constraints"] = json!(snapshot.ladder.constraint_texts());
    }
    let asked = cx
        .ask(Question {
            purpose: Purpose::Verifier,
            milestone,
            attempt,
            prompt: &prompts::VERIFIER,
            input,
            turns: Vec::new(),
            schema: schemas::verdict(),
        })
        .await;
    let (verified, reason) = match &asked.reply {
        Ok(reply) => match parse_verdict(&reply.value) {
            Ok((passed, reason)) => (Some(passed), reason),
            Err(reason) => (None, reason),
        },
        Err(error) => (None, error.message.clone()),
    };
    // Staged: the ending (or the replan) that follows commits it.
    let (applied, ()) = cx
        .journal
        .stage_prompted(&asked.prompt, |state| {
            let mut record = Record::default();
            ledger::charge(state, None, asked.spend, "verifier", &mut record)?;
            state.phase = if state.phase == Phase::Direct {
                Phase::Direct
            } else {
                Phase::Verify
            };
            record.push(
                VERIFIER_DECIDED,
                json!({"verified": verified, "reason": reason, "attempt": attempt,
                       "evidence": "verifier"}),
            );
            Ok((record, ()))
        })
        .await?;
    Ok(Verdict {
        verified,
        reason,
        seq: applied.last_seq,
    })
}

/// The goal verifier's evidence from the plan: every milestone with its check and its latest
/// tool outputs, and `passed`, what the plan's own checks say.
pub async fn evidence(cx: &Attempt, passed: Value) -> Value {
    cx.journal
        .read(|s| {
            let milestones: Vec<_> = s
                .plan
                .iter()
                .flat_map(|p| p.milestones.iter())
                .map(|m| {
                    // A passed milestone's earlier check failures are not evidence about the
                    // goal: a model's verdict its check later overruled (live, the 1.5B goal
                    // verifier repeated a superseded "not the correct data" over a right upload).
                    let done = m.status == MilestoneStatus::Done;
                    let observed = s.runs.get(&m.id).map(|r| {
                        r.observations
                            .iter()
                            .rev()
                            .filter(|o| !(done && o.get("check").is_some()))
                            // The engine's notes to its planner are not evidence.
                            .filter(|o| o.get(super::follow_up::NOTE).is_none())
                            .take(6)
                            .cloned()
                            .collect::<Vec<_>>()
                    });
                    // One judged by the engine's check shows that check, not the overruled one.
                    let engine = s.runs.get(&m.id).is_some_and(|r| r.engine_check);
                    let accept = match engine {
                        true => json!({"type": "steps_succeeded", "judged_by": "engine"}),
                        false => json!(m.accept),
                    };
                    json!({"id": m.id, "title": m.title, "accept": accept,
                           "tool_outputs": observed})
                })
                .collect();
            json!({"passed": passed, "milestones": milestones})
        })
        .await
}

/// A fail found without the model: named targets no successful tool call touched.
async fn programmatic_fail(
    cx: &Attempt,
    untouched: &[String],
    attempt: u32,
) -> Result<Verdict, Halt> {
    let reason = format!(
        "no successful tool call touched {} named in the goal",
        untouched.join(", ")
    );
    let (applied, ()) = cx
        .journal
        .stage(|state| {
            state.phase = if state.phase == Phase::Direct {
                Phase::Direct
            } else {
                Phase::Verify
            };
            let record = Record::event(
                VERIFIER_DECIDED,
                json!({"verified": false, "reason": reason, "attempt": attempt,
                       "evidence": "programmatic", "untouched": untouched}),
            );
            Ok((record, ()))
        })
        .await?;
    Ok(Verdict {
        verified: Some(false),
        reason,
        seq: applied.last_seq,
    })
}

/// The goal's named targets that no successful tool call's arguments mention (as a word,
/// ignoring case: `a/config.py` touches `A`).
pub fn untouched_targets(goal: &str, state: &TaskState) -> Vec<String> {
    let targets = goal_targets(goal);
    if targets.is_empty() {
        return targets;
    }
    let direct = state
        .direct
        .as_ref()
        .and_then(|d| d.get("observations"))
        .and_then(Value::as_array);
    let observations = state
        .runs
        .values()
        .flat_map(|run| run.observations.iter())
        .chain(direct.into_iter().flatten());
    let mut words: Vec<String> = Vec::new();
    for observation in observations.filter(|o| o.get("ok") == Some(&Value::Bool(true))) {
        if let Some(args) = observation.get("args") {
            collect_words(args, &mut words);
        }
    }
    // A milestone that passed its acceptance check vouches for those of its steps that
    // succeeded, also when their observations are not in this run's record (carried across a
    // plan version), and for its command checks' arguments. A step that failed or never ran
    // vouches for nothing: the real model's acceptance check passes a milestone whose lookup
    // failed.
    let passed = state
        .plan
        .iter()
        .flat_map(|plan| plan.milestones.iter())
        .filter(|m| m.status == MilestoneStatus::Done);
    for milestone in passed {
        let succeeded = milestone
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Done);
        for step in succeeded {
            collect_words(&step.args, &mut words);
        }
        // A passed command check is a successful tool call too, and it runs after a resume,
        // also when the step it checks was performed but its commit was lost to a crash or a
        // store fault.
        command_args(&milestone.accept, &mut |args| {
            collect_words(args, &mut words)
        });
    }
    targets
        .into_iter()
        .filter(|t| !words.contains(&t.to_lowercase()))
        .collect()
}

/// Argument fields that carry prose for a reader rather than the name of what a call acts on.
const FREE_TEXT_FIELDS: &[&str] = &[
    "text",
    "body",
    "message",
    "note",
    "content",
    "comment",
    "description",
    "summary",
];

/// More words than this make a string a sentence, not a name.
const MAX_NAME_WORDS: usize = 4;

/// The arguments of every command check in `check` (inside `all` too).
fn command_args(check: &Check, visit: &mut dyn FnMut(&Value)) {
    match check {
        Check::Command { args, .. } => visit(args),
        Check::All { checks } => checks.iter().for_each(|c| command_args(c, visit)),
        _ => {}
    }
}

fn collect_words(value: &Value, words: &mut Vec<String>) {
    match value {
        Value::String(text) if text.split_whitespace().count() <= MAX_NAME_WORDS => {
            for word in text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.')))
            {
                let word = word.trim_end_matches('.').to_lowercase();
                // `export.csv` also counts as `export` and `csv`.
                words.extend(word.split(['.', '-', '_']).map(str::to_string));
                words.push(word);
            }
            words.retain(|w| !w.is_empty());
        }
        Value::Array(items) => items.iter().for_each(|v| collect_words(v, words)),
        Value::Object(fields) => fields
            .iter()
            .filter(|(key, _)| !FREE_TEXT_FIELDS.contains(&key.to_lowercase().as_str()))
            .for_each(|(_, v)| collect_words(v, words)),
        Value::Number(n) => words.push(n.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;

    fn state_with(step_status: &str, observation_ok: bool) -> TaskState {
        let plan: Plan = serde_json::from_value(json!({"milestones": [{
            "id": "m1", "title": "look up B", "effort": 1, "status": "done",
            "accept": {"type": "verifier", "prompt": "the owner of B is known"},
            "steps": [{"id": "m1.s1", "tool": "lookup", "args": {"service": "B"},
                       "status": step_status}],
        }]}))
        .unwrap();
        let mut state = TaskState {
            plan: Some(plan),
            ..TaskState::default()
        };
        state.run_mut("m1").observations.push(json!({
            "step": "m1.s1", "tool": "lookup", "args": {"service": "B"}, "ok": observation_ok,
        }));
        state
    }

    const GOAL: &str = "Write a note to the owner of service B";

    #[test]
    fn a_successful_call_touches_its_target() {
        assert!(untouched_targets(GOAL, &state_with("done", true)).is_empty());
    }

    #[test]
    fn free_text_names_no_target() {
        let mut state = state_with("failed", false);
        state.run_mut("m1").observations.push(json!({
            "step": "m1.s2", "tool": "write_note", "ok": true,
            "args": {"owner": "Priya Raman", "text": "B"},
        }));
        state.run_mut("m1").observations.push(json!({
            "step": "m1.s3", "tool": "post", "ok": true,
            "args": {"channel": "ops", "line": "service B restarts tonight at ten"},
        }));
        assert_eq!(untouched_targets(GOAL, &state), vec!["B".to_string()]);
        state.run_mut("m1").observations.push(json!({
            "step": "m1.s4", "tool": "restart", "ok": true, "args": {"target": "service B"},
        }));
        assert!(untouched_targets(GOAL, &state).is_empty());
    }

    #[test]
    fn a_passed_milestone_does_not_vouch_for_its_failed_step() {
        let untouched = untouched_targets(GOAL, &state_with("failed", false));
        assert_eq!(untouched, vec!["B".to_string()]);
    }

    #[test]
    fn a_passed_command_check_vouches_for_its_arguments_when_the_step_commit_was_lost() {
        let mut state = state_with("pending", false);
        state.runs.clear();
        if let Some(plan) = state.plan.as_mut() {
            plan.milestones[0].accept = serde_json::from_value(json!({
                "type": "command", "tool": "run", "args": {"cmd": "make test", "cwd": "b"}
            }))
            .unwrap();
        }
        assert!(untouched_targets(GOAL, &state).is_empty());
    }

    #[test]
    fn a_passed_milestone_vouches_for_its_succeeded_step_without_an_observation() {
        let mut state = state_with("done", true);
        state.runs.clear();
        assert!(untouched_targets(GOAL, &state).is_empty());
    }
}
