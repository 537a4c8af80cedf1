//! `GET /v1/tasks/{id}/ledger`: a task's budget ledger, derived from its entries alone.
//!
//! The entries are the record (append-only: `allocate`, `charge`, `grant`, `return`); the
//! summary replays them through the domain ledger ([`Ledger::replay`]), never reading the
//! engine's memory, so what a client sees is exactly what the database can prove. An
//! `allocate` without a milestone fills the reserve; a `charge` without one is task overhead
//! (gate, planning, the goal verifier). Which charges were estimates is not on an entry: it is
//! the committed checkpoint's sum of the task's `ledger.estimated` events.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::ledger::{Ledger, LedgerMovement, LedgerSummary, PerUnit, UnitSummary};
use crate::domain::report::Estimated;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiPath, parse_task_id};
use crate::http::tasks::find_task;
use crate::store::LedgerEntry;

/// The ledger of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LedgerView {
    /// By unit: `tokens`, `tool_calls`, `wall_ms`, `cost`.
    pub units: std::collections::BTreeMap<String, UnitSummary>,
    /// Every movement, oldest first.
    pub entries: Vec<LedgerEntry>,
    /// The part of the charges booked from estimates: model calls whose endpoint reported no
    /// usage, so cairn counted their tokens itself (each also a `ledger.estimated` event).
    pub estimated: Estimated,
}

/// Replays the entries through the domain ledger and reports its books per unit.
pub fn summarize(totals: PerUnit<u64>, entries: &[LedgerEntry]) -> Result<LedgerSummary, String> {
    let movements = entries
        .iter()
        .map(|e| LedgerMovement::from_parts(e.milestone_id.clone(), &e.kind, &e.unit, e.amount))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let ledger = Ledger::replay(totals, &movements).map_err(|e| e.to_string())?;
    Ok(ledger.summary())
}

/// Reads a task's ledger.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/ledger",
    tag = "ledger",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 200, description = "The ledger: per-unit summary derived from the entries, and the entries.", body = LedgerView),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn get_ledger(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<LedgerView>, ApiError> {
    let id = parse_task_id(&id)?;
    let task = find_task(&state, &principal.tenant, id).await?;
    let entries = state
        .store
        .list_ledger_entries(&principal.tenant, id)
        .await?;
    let units = summarize(PerUnit::from(task.budget), &entries)
        .map_err(|error| ApiError::Internal(format!("ledger entries do not replay: {error}")))?;
    // The engine's checkpoint keeps the running sum of its `ledger.estimated` events.
    let checkpoint = state.store.get_checkpoint(&principal.tenant, id).await?;
    let estimated = checkpoint
        .as_ref()
        .and_then(|state| state.get("estimated"))
        .and_then(|value| serde_json::from_value(value.clone()).ok())
        .unwrap_or_default();
    Ok(Json(LedgerView {
        units,
        entries,
        estimated,
    }))
}
