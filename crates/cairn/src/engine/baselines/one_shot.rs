//! Strategy A: one model call, no tool loop.
//!
//! The cheapest possible agent and the right one for goals a model can answer from what it
//! knows. It cannot act in the world, so any goal that needs a tool result is out of its
//! reach; the evaluation shows where that line is.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Finish, Ports, Progress, context, exhausted, finish, stop_outcome};
use crate::domain::event::kinds::STRATEGY_ROUND;
use crate::domain::task::TaskStatus;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::checkpoint::{EngineKind, Record};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::Purpose;
use crate::engine::{Engine, EngineError, Halt, RunContext, RunOutcome};
use crate::engine::{prompts, schemas};

pub const NAME: &str = "one_shot";

#[derive(Clone)]
pub struct OneShotEngine {
    ports: Ports,
}

impl OneShotEngine {
    pub fn new(ports: Ports) -> Self {
        Self { ports }
    }
}

#[async_trait]
impl Engine for OneShotEngine {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        let cx = context(&self.ports, ctx, EngineKind::OneShot)?;
        crate::engine::runtime::approvals::settle(&cx, run(&cx).await).await
    }
}

async fn run(cx: &crate::engine::runtime::attempt::Attempt) -> Result<RunOutcome, Halt> {
    if let Some(outcome) = stop_outcome(cx) {
        return Ok(outcome);
    }
    let done = cx.journal.read(Progress::load).await;
    if done.rounds == 0 {
        let input = json!({"goal": cx.task().goal, "strategy": NAME});
        let asked = cx
            .ask(Question {
                purpose: Purpose::Tactical,
                milestone: Some(NAME),
                attempt: 1,
                prompt: &prompts::ONE_SHOT,
                input,
                turns: Vec::new(),
                schema: schemas::one_shot(),
            })
            .await;
        let answer = match &asked.reply {
            Ok(reply) => reply.value.get("answer").cloned(),
            Err(_) => None,
        };
        let error = asked.reply.as_ref().err().map(|e| e.message.clone());
        cx.journal
            .record_prompted(&asked.prompt, |state| {
                let mut record = Record::default();
                ledger::charge(state, None, asked.spend, "one_shot", &mut record)?;
                let mut progress = Progress::load(state);
                progress.rounds = 1;
                progress.answer = answer.clone();
                progress.store(state);
                record.push(
                    STRATEGY_ROUND,
                    json!({"strategy": NAME, "round": 1, "answered": answer.is_some(), "error": error}),
                );
                Ok((record, ()))
            })
            .await?;
    }
    if let Some(outcome) = exhausted(cx, NAME).await? {
        return Ok(outcome);
    }
    let answer: Option<Value> = cx.journal.read(|s| Progress::load(s).answer).await;
    let (status, reason) = match &answer {
        Some(_) => (TaskStatus::Succeeded, "answered in one call".to_string()),
        None => (TaskStatus::Failed, "the model gave no answer".to_string()),
    };
    finish(
        cx,
        Finish {
            strategy: NAME,
            status,
            reason,
            answer,
        },
    )
    .await
}
