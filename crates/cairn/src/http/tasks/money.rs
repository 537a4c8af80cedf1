//! A task's money cap, checked when it is submitted.

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
