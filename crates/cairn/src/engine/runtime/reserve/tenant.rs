//! The tenant's spend cap at reservation: a capped task's call is reserved against the smaller
//! of its own money room and what its tenant's period has left. A call the period cannot cover
//! is not the task's fault: when only this attempt's own calls in flight keep it from fitting,
//! it waits for one of them to settle; otherwise the attempt stops before it (what is staged is
//! committed, the journal closed) and the task waits, queued, for the period's end.

use serde_json::json;

use super::books::{Limited, Refusal, Reserved, TenantRoom};
use crate::domain::event::kinds;
use crate::domain::ledger::{PerUnit, Unit};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::Record;

impl Attempt {
    /// [`Attempt::reserve`] under the tenant's spend cap. `refused_cost`: the money of the
    /// smallest form of a call refused on money. A refusal only this attempt's calls in flight
    /// cause is tried again once one of them settles.
    pub(super) async fn reserve_capped<T>(
        &self,
        milestone: Option<&str>,
        decide: impl Fn(&PerUnit<Option<u64>>) -> (T, PerUnit<u64>),
        refused_cost: impl Fn(&T) -> Option<u64>,
    ) -> Result<Reserved<T>, Refusal> {
        loop {
            // Listening before the holds are read, so a release in between is not missed.
            let released = self.held.released.notified();
            let mut released = std::pin::pin!(released);
            released.as_mut().enable();
            let tenant = match self.tenant_room().await {
                Ok(tenant) => tenant,
                Err(halt) => return Err(self.stop(halt).await),
            };
            let reserved = self.reserve(milestone, tenant, &decide).await;
            let settles = reserved.tenant_binds
                && reserved.held_cost > 0
                && refused_cost(&reserved.decision)
                    .zip(tenant)
                    .is_some_and(|(cost, tenant)| cost <= tenant.left);
            if !settles {
                return Ok(reserved);
            }
            drop(reserved);
            released.await;
        }
    }

    /// What the task's tenant may still spend in the current period, and its cap; `None` when
    /// it has no cap. The staged transitions are committed first, so the tenant's books hold
    /// every charge of this task: with one running task per tenant the cap is never exceeded;
    /// tasks of one tenant running at once may each reserve the same room.
    async fn tenant_room(&self) -> Result<Option<TenantRoom>, Halt> {
        let caps = &self.config.spend_caps;
        let tenant = self.task().tenant_id.as_str();
        let Some(cap) = caps.cap(tenant) else {
            return Ok(None);
        };
        self.journal.flush().await?;
        let ctx = self.journal.ctx();
        let since = caps.period.start(ctx.clock.now());
        let hours = ctx.store.spend(Some(tenant), since).await?;
        let spent = crate::store::SpendHour::total(&hours);
        Ok(Some(TenantRoom {
            left: cap.saturating_sub(spent),
            cap,
        }))
    }

    /// How a call its books refused ends: a call the tenant's period could cover, had it not
    /// been spent, waits for the next period; any other is the task's own refusal (an
    /// unpriced call, whose worst case is no money, is never sent under a money cap).
    pub(super) async fn refuse(
        &self,
        limited: Limited<'_>,
        tenant: Option<TenantRoom>,
        tenant_binds: bool,
    ) -> Refusal {
        let unit = limited.refused.unwrap_or(Unit::Tokens);
        let cost = limited.worst.cost;
        let next_period_fits = tenant.is_some_and(|t| cost > 0 && cost <= t.cap);
        if tenant_binds && unit == Unit::Cost && next_period_fits {
            return Refusal::Stopped(self.defer(limited).await);
        }
        self.limited(limited).await;
        Refusal::Budget(unit)
    }

    /// Stops the attempt before a call its tenant's period cannot cover: records why
    /// (`ledger.limited` with `scope: "tenant"`), commits what is staged, and closes the
    /// journal so the task is handed back until the period ends.
    async fn defer(&self, limited: Limited<'_>) -> Halt {
        let caps = &self.config.spend_caps;
        let until = caps.period.end(self.journal.ctx().clock.now());
        let mut data = limited.data();
        data["scope"] = json!("tenant");
        data["period"] = json!(caps.period.as_str());
        data["until"] = json!(until);
        // A journal that cannot stage is broken for the close too, which keeps its failure.
        let _ = self
            .journal
            .stage(|_| {
                let mut record = Record::default();
                record.push(kinds::LEDGER_LIMITED, data);
                Ok((record, ()))
            })
            .await;
        let halt = Halt::Deferred(until);
        self.journal.close(&halt).await;
        halt
    }

    /// Stops the attempt on a failure met outside a transition.
    async fn stop(&self, halt: Halt) -> Refusal {
        self.journal.close(&halt).await;
        Refusal::Stopped(halt)
    }
}
