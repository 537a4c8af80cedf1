//! The goal-level verifier: plan completion is not goal completion (second seed).
//!
//! After every milestone passed, the verifier model judges the goal itself from the finished
//! plan, the checks' evidence and the artifacts. Its verdict is recorded as a
//! `verifier.decided` event and decides whether the task's result says `verified`.

use serde_json::{Value, json};

use crate::domain::check::parse_verdict;
use crate::domain::event::kinds::VERIFIER_DECIDED;
use crate::engine::Halt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::attempt::{Attempt, brief};
use crate::engine::runtime::checkpoint::{Phase, Record};
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
    let input = json!({
        "goal": cx.task().goal,
        "plan": snapshot.plan,
        "artifacts": brief(&json!(snapshot.artifacts), 12000),
        "evidence": evidence,
    });
    let asked = cx
        .ask(Question {
            purpose: Purpose::Verifier,
            milestone,
            attempt,
            prompt: &prompts::VERIFIER,
            input,
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
    let (applied, ()) = cx
        .journal
        .record_prompted(&asked.prompt, |state| {
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
