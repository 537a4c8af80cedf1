//! Settling a model call once it answered: what it cost, priced; what the provider reported
//! beyond what its reservation bounded, learned for every later reservation of the task (and
//! kept in the checkpoint, so a resumed attempt reserves as the last one learned); and, where
//! the provider reported no usage, the estimate marked as such (`ledger.estimated`).

use std::time::Instant;

use super::{ONE, Overreport, model_price};
use crate::domain::event::kinds;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Learned, Record, Spend};
use crate::engine::runtime::ports::{FailureKind, ModelReply, PortError, Purpose};

/// What a model call was sent with.
pub struct Sent<'a> {
    pub purpose: Purpose,
    pub milestone: Option<&'a str>,
    /// [`crate::engine::runtime::ports::ModelCall::prompt_bound`].
    pub bound: u64,
    pub max_tokens: u64,
    pub started: Instant,
    /// The call's wall time limit ([`super::Hold::wall_limit_ms`]): it is charged at most that.
    pub wall_limit_ms: Option<u64>,
}

/// Runs a call within `limit` milliseconds of wall time, its milestone's: one still running
/// then is cut off (dropped, as if its answer were lost) and fails as transient.
pub async fn within<T>(
    limit: Option<u64>,
    call: impl std::future::Future<Output = Result<T, PortError>>,
) -> Result<T, PortError> {
    let Some(ms) = limit else {
        return call.await;
    };
    tokio::time::timeout(std::time::Duration::from_millis(ms), call)
        .await
        .unwrap_or_else(|_| {
            Err(PortError::new(
                FailureKind::Transient,
                format!("cut off after {ms} ms: the milestone's wall time ran out"),
            ))
        })
}

/// The wall time a call that started at `started` is charged: what it took, at most its limit.
pub fn wall_ms(started: Instant, limit: Option<u64>) -> u64 {
    let took = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    took.min(limit.unwrap_or(u64::MAX))
}

impl Overreport {
    /// What an earlier attempt of the task learned.
    pub fn resumed(learned: Learned) -> Overreport {
        let overreport = Overreport::default();
        overreport.learn_ratio(learned.answer_ppm);
        overreport.learn_prompt(learned.prompt_excess, 0);
        overreport
    }

    /// What this attempt knows, for the checkpoint.
    pub fn learned(&self) -> Learned {
        Learned {
            answer_ppm: self.ppm().max(ONE),
            prompt_excess: self.prompt_excess(),
        }
    }
}

impl Attempt {
    /// The spend of a model call that answered (or failed after an answer): its tokens as the
    /// provider reported them, whatever it counted beyond the prompt priced as answer tokens
    /// (a total reported without its split, or above it, is never booked as free).
    pub async fn settle_model_call(
        &self,
        sent: Sent<'_>,
        reply: &Result<ModelReply, PortError>,
    ) -> Spend {
        let (tokens, split, estimated) = match reply {
            Ok(reply) => (reply.tokens, reply.split, reply.estimated),
            Err(error) => (error.tokens, error.split, error.estimated),
        };
        let written = tokens.saturating_sub(split.input);
        if let Ok(reply) = reply {
            let before = self.overreport.learned();
            let prompts = 1 + u64::from(reply.asked_output > sent.max_tokens);
            self.overreport.learn(written, reply.asked_output);
            self.overreport
                .learn_prompt(split.input, sent.bound.saturating_mul(prompts));
            let learned = self.overreport.learned();
            if learned != before {
                // Nothing else to record: the state carries it with the next commit.
                let _ = self
                    .journal
                    .stage(|state| {
                        state.learned = learned;
                        Ok((Record::default(), ()))
                    })
                    .await;
            }
        }
        let price = model_price(&self.config.prices.models, sent.purpose);
        let spend = Spend {
            tokens,
            tool_calls: 0,
            wall_ms: wall_ms(sent.started, sent.wall_limit_ms),
            cost: price.map_or(0, |p| p.of(split.input, written)),
        };
        if estimated && tokens > 0 {
            self.estimated(&sent, spend).await;
        }
        spend
    }

    /// Marks a call's spend as estimated (`ledger.estimated`), staged ahead of its charge,
    /// which its caller records: both are committed together.
    async fn estimated(&self, sent: &Sent<'_>, spend: Spend) {
        let data = serde_json::json!({
            "call": sent.purpose.as_str(), "milestone": sent.milestone,
            "tokens": spend.tokens, "cost": spend.cost,
        });
        // A journal that cannot stage is broken for the caller's charge too, which reports it.
        let _ = self
            .journal
            .stage(|state| {
                state.estimated.add(&spend);
                let mut record = Record::default();
                record.push(kinds::LEDGER_ESTIMATED, data);
                Ok((record, ()))
            })
            .await;
    }
}
