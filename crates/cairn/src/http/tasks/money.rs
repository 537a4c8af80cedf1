//! A task's money cap, and its tenant's spend cap, checked when it is submitted.

use chrono::DateTime;

use crate::domain::task::Budget;
use crate::http::AppState;
use crate::http::error::ApiError;

/// A money cap needs a price for every model and every tool a task may call (`[prices]`).
pub(super) fn check(state: &AppState, budget: &Budget) -> Result<(), ApiError> {
    let registry = state.tools.current();
    let unpriced = match (budget.cost, state.pricing.as_deref()) {
        (Some(_), Some(pricing)) => pricing.unpriced(registry.specs().map(|s| s.name.as_str())),
        _ => None,
    };
    match unpriced {
        Some(why) => {
            let detail = format!(
                "budget.cost: this server cannot cap money: its price table has no price for {why}"
            );
            Err(ApiError::Validation {
                errors: vec![detail.clone()],
                detail,
            })
        }
        None => Ok(()),
    }
}

/// A tenant that has spent its cap for the period, or whose task waits for the period's end
/// because its next call does not fit what is left, submits nothing new until the period ends
/// (`[spend_caps]`): a 429 with `Retry-After`, and nothing written.
pub(super) async fn tenant_room(state: &AppState, tenant: &str) -> Result<(), ApiError> {
    let caps = &state.spend_caps;
    let Some(cap) = caps.cap(tenant) else {
        return Ok(());
    };
    let now = state.clock.now();
    let hours = state
        .store
        .spend(Some(tenant), caps.period.start(now))
        .await?;
    let spent = crate::store::SpendHour::total(&hours);
    let waits = state.store.spend_waits(Some(tenant), now).await?;
    if !caps.reached(tenant, spent) && waits.is_empty() {
        return Ok(());
    }
    let end = waits
        .iter()
        .map(|(_, until)| *until)
        .fold(caps.period.end(now), DateTime::max);
    let retry_after_s = u64::try_from((end - now).num_seconds().max(1)).unwrap_or(1);
    let currency = state
        .pricing
        .as_deref()
        .map_or("the currency", |pricing| pricing.prices.currency.as_str());
    let period = caps.period.as_str();
    let waiting = if waits.is_empty() {
        String::new()
    } else {
        format!(
            " and a task of it waits for the {period}'s end, its next call costing more than is left"
        )
    };
    Err(ApiError::SpendCapReached {
        detail: format!(
            "tenant {tenant} has spent {spent} of its {cap} micro-units of {currency} for this \
             {period}{waiting}; new tasks are accepted again from {end}",
            end = end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ),
        retry_after_s,
    })
}
