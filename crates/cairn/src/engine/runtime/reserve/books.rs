//! Reservations against one task's books: each decided and held under the journal's lock,
//! which every charge also takes, so two calls of a task never count on the same room; a call
//! whose charge is on the books while its hold is not yet released is counted twice, never not
//! at all.

use serde_json::json;

use super::{ModelAsk, Reservation, Sized, model_price, reserve_model, reserve_tool};
use crate::domain::event::kinds;
use crate::domain::ledger::{PerUnit, Unit};
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::Record;
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{ModelCall, least_answer};

/// What this attempt's reservations hold against the books, per unit.
pub type Holds = std::sync::Arc<std::sync::Mutex<PerUnit<u64>>>;

/// One call's reservation, held from before the call until its spend is on the books: it
/// travels with the call's answer (`Asked::hold`, `Called::hold`), which its caller keeps until
/// the charge is recorded, and is released when dropped.
pub struct Hold {
    holds: Holds,
    worst: PerUnit<u64>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let worst = self.worst;
        let mut held = self
            .holds
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for unit in Unit::ALL {
            let amount = held.get_mut(unit);
            *amount = amount.saturating_sub(*worst.get(unit));
        }
    }
}

/// A call the books cannot cover, or could only cover smaller: what `ledger.limited` says.
pub struct Limited<'a> {
    pub what: &'a str,
    pub milestone: Option<&'a str>,
    pub room: PerUnit<Option<u64>>,
    pub worst: PerUnit<u64>,
    pub refused: Option<Unit>,
    pub sized: Option<Sized>,
}

impl Attempt {
    /// Reads what a call charged to `milestone` may still spend (less what is held), lets
    /// `decide` size the call, and holds the worst case it returns: all under the journal's
    /// lock. Returns the decision, the room it saw and the hold.
    async fn reserve<T>(
        &self,
        milestone: Option<&str>,
        decide: impl FnOnce(&PerUnit<Option<u64>>) -> (T, PerUnit<u64>),
    ) -> (T, PerUnit<Option<u64>>, Hold) {
        let budget = self.task().budget;
        let holds = self.held.clone();
        self.journal
            .read(move |state| {
                let mut room = ledger::room(state, milestone, budget);
                // A poisoned lock still holds the figures; only a panic elsewhere poisoned it.
                let mut held = holds
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                for unit in Unit::ALL {
                    if let Some(left) = room.get_mut(unit) {
                        *left = left.saturating_sub(*held.get(unit));
                    }
                }
                let (decision, worst) = decide(&room);
                for unit in Unit::ALL {
                    let amount = held.get_mut(unit);
                    *amount = amount.saturating_add(*worst.get(unit));
                }
                drop(held);
                (decision, room, Hold { holds, worst })
            })
            .await
    }

    /// Sizes `call` to the books; `Err` names the unit it was refused on (recorded, so the
    /// task stops `budget_exhausted`).
    pub async fn reserve_model_call(
        &self,
        call: &mut ModelCall,
        charged_to: Option<&str>,
    ) -> Result<Hold, Unit> {
        let ask = ModelAsk {
            prompt: call
                .prompt_bound()
                .saturating_add(self.overreport.prompt_excess()),
            wanted: call.max_tokens,
            least: least_answer(call.purpose).min(call.max_tokens),
            price: model_price(&self.config.prices.models, call.purpose),
            scale_ppm: self.overreport.ppm(),
        };
        let (reservation, room, hold) = self
            .reserve(charged_to, |room| {
                let reservation = reserve_model(&ask, room);
                let worst = match reservation {
                    Reservation::Whole(sized) | Reservation::Cut(sized) => ask.worst(sized),
                    Reservation::Refused(_) => PerUnit::default(),
                };
                (reservation, worst)
            })
            .await;
        let (sized, refused) = match reservation {
            Reservation::Whole(_) => return Ok(hold),
            Reservation::Cut(sized) => (Some(sized), None),
            Reservation::Refused(unit) => (None, Some(unit)),
        };
        let least = Sized {
            max_tokens: ask.least,
            retry_max_tokens: 0,
        };
        let limited = Limited {
            what: call.purpose.as_str(),
            milestone: call.milestone.as_deref(),
            room,
            worst: ask.worst(sized.unwrap_or(least)),
            refused,
            sized,
        };
        self.limited(limited).await;
        match (sized, refused) {
            (Some(sized), _) => {
                call.max_tokens = sized.max_tokens;
                call.retry_max_tokens = sized.retry_max_tokens;
                Ok(hold)
            }
            (None, refused) => Err(refused.unwrap_or(Unit::Tokens)),
        }
    }

    /// Reserves one call of `tool` and its price; `Err` names the unit it was refused on
    /// (recorded, so the task stops `budget_exhausted`).
    pub async fn reserve_tool_call(
        &self,
        tool: &str,
        charged_to: Option<&str>,
        price: Option<u64>,
    ) -> Result<Hold, Unit> {
        let worst = PerUnit {
            tool_calls: 1,
            cost: price.unwrap_or(0),
            ..PerUnit::default()
        };
        let (fits, room, hold) = self
            .reserve(charged_to, |room| {
                let fits = reserve_tool(price, room);
                (
                    fits,
                    if fits.is_ok() {
                        worst
                    } else {
                        PerUnit::default()
                    },
                )
            })
            .await;
        let Err(unit) = fits else {
            return Ok(hold);
        };
        let limited = Limited {
            what: tool,
            milestone: charged_to,
            room,
            worst,
            refused: Some(unit),
            sized: None,
        };
        self.limited(limited).await;
        Err(unit)
    }

    /// Records a cut or refused call (`ledger.limited`); a refusal marks the task overdrawn.
    pub async fn limited(&self, limited: Limited<'_>) {
        let caps = |room: &PerUnit<Option<u64>>| json!({"tokens": room.tokens, "tool_calls": room.tool_calls, "cost": room.cost});
        let worst = limited.worst;
        let data = json!({
            "call": limited.what,
            "milestone": limited.milestone,
            "room": caps(&limited.room),
            "worst": {"tokens": worst.tokens, "tool_calls": worst.tool_calls, "cost": worst.cost},
            "refused": limited.refused,
            "max_tokens": limited.sized.map(|s| s.max_tokens),
            "retry_max_tokens": limited.sized.map(|s| s.retry_max_tokens),
        });
        let refused = limited.refused;
        // A journal that cannot stage is broken for the next commit too, which reports it.
        let _ = self
            .journal
            .stage(|state| {
                state.refused = state.refused.or(refused);
                let mut record = Record::default();
                record.push(kinds::LEDGER_LIMITED, data);
                Ok((record, ()))
            })
            .await;
    }
}
