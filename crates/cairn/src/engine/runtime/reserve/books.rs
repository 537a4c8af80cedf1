//! Reservations against one task's books: each decided and held under the journal's lock,
//! which every charge also takes, so two calls of a task never count on the same room; a call
//! whose charge is on the books while its hold is not yet released is counted twice, never not
//! at all.

use serde_json::json;

use super::{ModelAsk, Reservation, Sized, model_price, reserve_model, reserve_tool};
use crate::domain::event::kinds;
use crate::domain::ledger::{PerUnit, Unit};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::Record;
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{ModelCall, least_answer};

/// What this attempt's reservations hold against the books, per unit, and a signal each time
/// one is released.
#[derive(Debug, Default)]
pub struct HoldBook {
    figures: std::sync::Mutex<PerUnit<u64>>,
    pub(super) released: tokio::sync::Notify,
}

pub type Holds = std::sync::Arc<HoldBook>;

impl HoldBook {
    fn figures(&self) -> std::sync::MutexGuard<'_, PerUnit<u64>> {
        // A poisoned lock still holds the figures; only a panic elsewhere poisoned it.
        self.figures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One call's reservation, held from before the call until its spend is on the books: it
/// travels with the call's answer (`Asked::hold`, `Called::hold`), which its caller keeps until
/// the charge is recorded, and is released when dropped.
pub struct Hold {
    holds: Holds,
    worst: PerUnit<u64>,
    /// The most wall time the call may take: what its milestone and the reserve had left
    /// (`None`: no wall budget).
    pub wall_limit_ms: Option<u64>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let worst = self.worst;
        let mut held = self.holds.figures();
        for unit in Unit::ALL {
            let amount = held.get_mut(unit);
            *amount = amount.saturating_sub(*worst.get(unit));
        }
        drop(held);
        // A refused call held nothing: no room came free.
        if Unit::ALL.iter().any(|unit| *worst.get(*unit) > 0) {
            self.holds.released.notify_waiters();
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

/// What a capped tenant may still spend in the current period, and its cap.
#[derive(Debug, Clone, Copy)]
pub struct TenantRoom {
    pub left: u64,
    pub cap: u64,
}

/// A reservation's decision, with what it was decided on.
pub struct Reserved<T> {
    pub decision: T,
    /// The room the decision saw, less what was held.
    pub room: PerUnit<Option<u64>>,
    pub tenant: Option<TenantRoom>,
    /// Money's room was the tenant's period, not the task's own.
    pub tenant_binds: bool,
    /// The money this attempt's calls in flight held when it was decided.
    pub held_cost: u64,
    pub hold: Hold,
}

/// Why a call was not sent.
pub enum Refusal {
    /// The task's own books cannot cover it: the task stops `budget_exhausted`.
    Budget(Unit),
    /// The attempt stops here (the journal is closed with this halt): the tenant's spend cap
    /// for the period cannot cover the call, or reading the tenant's spend failed.
    Stopped(Halt),
}

impl Attempt {
    /// Reads what a call charged to `milestone` may still spend (less what is held), lets
    /// `decide` size the call, and holds the worst case it returns: all under the journal's
    /// lock. `tenant`: what the task's tenant may still spend this period, when capped; money's
    /// room is the smaller of the two, less what is held.
    pub(super) async fn reserve<T>(
        &self,
        milestone: Option<&str>,
        tenant: Option<TenantRoom>,
        decide: impl FnOnce(&PerUnit<Option<u64>>) -> (T, PerUnit<u64>),
    ) -> Reserved<T> {
        let budget = self.task().budget;
        let holds = self.held.clone();
        self.journal
            .read(move |state| {
                let mut room = ledger::room(state, milestone, budget);
                let mut held = holds.figures();
                for unit in Unit::ALL {
                    if let Some(left) = room.get_mut(unit) {
                        *left = left.saturating_sub(*held.get(unit));
                    }
                }
                let period = tenant.map(|t| t.left.saturating_sub(held.cost));
                let tenant_binds = match (period, room.cost) {
                    (Some(left), Some(own)) => left < own,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if tenant_binds {
                    room.cost = period;
                }
                let held_cost = held.cost;
                let (decision, worst) = decide(&room);
                for unit in Unit::ALL {
                    let amount = held.get_mut(unit);
                    *amount = amount.saturating_add(*worst.get(unit));
                }
                drop(held);
                let hold = Hold {
                    holds,
                    worst,
                    wall_limit_ms: room.wall_ms,
                };
                Reserved {
                    decision,
                    room,
                    tenant,
                    tenant_binds,
                    held_cost,
                    hold,
                }
            })
            .await
    }

    /// Sizes `call` to the books; a refusal says whether the task stops `budget_exhausted`
    /// (its own books; recorded) or the attempt stops here (the tenant's period).
    pub async fn reserve_model_call(
        &self,
        call: &mut ModelCall,
        charged_to: Option<&str>,
    ) -> Result<Hold, Refusal> {
        let ask = ModelAsk {
            prompt: call
                .prompt_bound()
                .saturating_add(self.overreport.prompt_excess()),
            wanted: call.max_tokens,
            least: least_answer(call.purpose).min(call.max_tokens),
            price: model_price(&self.config.prices.models, call.purpose),
            scale_ppm: self.overreport.ppm(),
        };
        let least = Sized {
            max_tokens: ask.least,
            retry_max_tokens: 0,
        };
        let decide = |room: &PerUnit<Option<u64>>| {
            let reservation = reserve_model(&ask, room);
            let worst = match reservation {
                Reservation::Whole(sized) | Reservation::Cut(sized) => ask.worst(sized),
                Reservation::Refused(_) => PerUnit::default(),
            };
            (reservation, worst)
        };
        let refused_cost = |reservation: &Reservation| match reservation {
            Reservation::Refused(Unit::Cost) => Some(ask.worst(least).cost),
            _ => None,
        };
        let reserved = self
            .reserve_capped(charged_to, decide, refused_cost)
            .await?;
        let (sized, refused) = match reserved.decision {
            Reservation::Whole(_) => return Ok(reserved.hold),
            Reservation::Cut(sized) => (Some(sized), None),
            Reservation::Refused(unit) => (None, Some(unit)),
        };
        let limited = Limited {
            what: call.purpose.as_str(),
            milestone: call.milestone.as_deref(),
            room: reserved.room,
            worst: ask.worst(sized.unwrap_or(least)),
            refused,
            sized,
        };
        let Some(sized) = sized else {
            let (tenant, binds) = (reserved.tenant, reserved.tenant_binds);
            return Err(self.refuse(limited, tenant, binds).await);
        };
        self.limited(limited).await;
        call.max_tokens = sized.max_tokens;
        call.retry_max_tokens = sized.retry_max_tokens;
        Ok(reserved.hold)
    }

    /// Reserves one call of `tool` and its price, refused as [`Attempt::reserve_model_call`]'s.
    pub async fn reserve_tool_call(
        &self,
        tool: &str,
        charged_to: Option<&str>,
        price: Option<u64>,
    ) -> Result<Hold, Refusal> {
        let worst = PerUnit {
            tool_calls: 1,
            cost: price.unwrap_or(0),
            ..PerUnit::default()
        };
        let decide = |room: &PerUnit<Option<u64>>| {
            let fits = reserve_tool(price, room);
            (
                fits,
                if fits.is_ok() {
                    worst
                } else {
                    PerUnit::default()
                },
            )
        };
        let refused_cost =
            |fits: &Result<(), Unit>| (*fits == Err(Unit::Cost)).then_some(worst.cost);
        let reserved = self
            .reserve_capped(charged_to, decide, refused_cost)
            .await?;
        let Err(unit) = reserved.decision else {
            return Ok(reserved.hold);
        };
        let limited = Limited {
            what: tool,
            milestone: charged_to,
            room: reserved.room,
            worst,
            refused: Some(unit),
            sized: None,
        };
        let (tenant, binds) = (reserved.tenant, reserved.tenant_binds);
        Err(self.refuse(limited, tenant, binds).await)
    }

    /// Records a cut or refused call (`ledger.limited`); a refusal marks the task overdrawn.
    pub async fn limited(&self, limited: Limited<'_>) {
        let data = limited.data();
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

impl Limited<'_> {
    /// The data of its `ledger.limited` event.
    pub(super) fn data(&self) -> serde_json::Value {
        let caps = |room: &PerUnit<Option<u64>>| json!({"tokens": room.tokens, "tool_calls": room.tool_calls, "cost": room.cost});
        let worst = self.worst;
        json!({
            "call": self.what,
            "milestone": self.milestone,
            "room": caps(&self.room),
            "worst": {"tokens": worst.tokens, "tool_calls": worst.tool_calls, "cost": worst.cost},
            "refused": self.refused,
            "max_tokens": self.sized.map(|s| s.max_tokens),
            "retry_max_tokens": self.sized.map(|s| s.retry_max_tokens),
        })
    }
}
