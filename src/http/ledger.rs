//! `GET /v1/tasks/{id}/ledger`: a task's budget ledger, derived from its entries alone.
//!
//! The entries are the record (append-only: `reserve`, `allocate`, `charge`, `grant`,
//! `return`); the summary is computed from them here, never read from the engine's memory, so
//! what a client sees is exactly what the database can prove. Per unit: the reserve is
//! `reserve + return - grant`; a milestone's allocation is `allocate + grant - return`; entries
//! without a milestone are task overhead (gate, planning, the goal verifier).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::app::AppState;
use crate::error::{ApiError, Problem};
use crate::http::extract::{ApiPath, parse_task_id};
use crate::http::tasks::find_task;
use crate::store::LedgerEntry;

/// One milestone's figures in one unit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MilestoneFigures {
    pub allocated: i64,
    pub spent: i64,
    pub granted: i64,
    pub returned: i64,
}

/// One unit's books.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UnitSummary {
    /// Held back when the plan was made.
    pub initial_reserve: i64,
    /// What the reserve holds now.
    pub reserve: i64,
    /// Spend not charged to a milestone (gate, planning, the goal verifier, the direct path).
    pub overhead: i64,
    /// Everything spent, overhead included.
    pub spent: i64,
    pub milestones: BTreeMap<String, MilestoneFigures>,
}

/// The ledger of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LedgerView {
    /// By unit: `tokens`, `tool_calls`, `wall_ms`.
    pub units: BTreeMap<String, UnitSummary>,
    /// Every movement, oldest first.
    pub entries: Vec<LedgerEntry>,
}

/// Derives the per-unit summary from the entries.
pub fn summarize(entries: &[LedgerEntry]) -> BTreeMap<String, UnitSummary> {
    let mut units: BTreeMap<String, UnitSummary> = BTreeMap::new();
    for entry in entries {
        let unit = units.entry(entry.unit.clone()).or_default();
        let amount = entry.amount;
        let figures = entry
            .milestone_id
            .as_ref()
            .map(|m| unit.milestones.entry(m.clone()).or_default());
        match (entry.kind.as_str(), figures) {
            ("reserve", _) => {
                unit.initial_reserve += amount;
                unit.reserve += amount;
            }
            ("allocate", Some(f)) => f.allocated += amount,
            ("charge", Some(f)) => {
                f.spent += amount;
                unit.spent += amount;
            }
            ("charge", None) => {
                unit.overhead += amount;
                unit.spent += amount;
            }
            ("grant", Some(f)) => {
                f.allocated += amount;
                f.granted += amount;
                unit.reserve -= amount;
            }
            ("return", Some(f)) => {
                f.allocated -= amount;
                f.returned += amount;
                unit.reserve += amount;
            }
            _ => {}
        }
    }
    units
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
    )
)]
pub async fn get_ledger(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<LedgerView>, ApiError> {
    let id = parse_task_id(&id)?;
    find_task(&state, id).await?;
    let entries = state.store.list_ledger_entries(id).await?;
    Ok(Json(LedgerView {
        units: summarize(&entries),
        entries,
    }))
}
