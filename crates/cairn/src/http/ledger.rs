//! `GET /v1/tasks/{id}/ledger`: a task's budget ledger, derived from its entries alone.
//!
//! The entries are the record (append-only: `allocate`, `charge`, `grant`, `return`); the
//! summary replays them through the domain ledger ([`Ledger::replay`]), never reading the
//! engine's memory, so what a client sees is exactly what the database can prove. An
//! `allocate` without a milestone fills the reserve; a `charge` without one is task overhead
//! (gate, planning, the goal verifier).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::ledger::{Ledger, LedgerMovement, MovementKind, PerUnit, Unit};
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
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

/// Replays the entries through the domain ledger and reports its books per unit.
pub fn summarize(
    totals: PerUnit<u64>,
    entries: &[LedgerEntry],
) -> Result<BTreeMap<String, UnitSummary>, String> {
    let movements = entries
        .iter()
        .map(|e| LedgerMovement::from_parts(e.milestone_id.clone(), &e.kind, &e.unit, e.amount))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let ledger = Ledger::replay(totals, &movements).map_err(|e| e.to_string())?;
    let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    Ok(Unit::ALL
        .iter()
        .map(|unit| {
            let book = ledger.book(*unit);
            let initial_reserve = movements
                .iter()
                .filter(|m| m.unit == *unit && m.milestone_id.is_none())
                .filter(|m| m.kind == MovementKind::Allocate)
                .map(|m| signed(m.amount))
                .sum();
            let milestones = book
                .accounts
                .iter()
                .map(|(id, a)| {
                    let figures = MilestoneFigures {
                        allocated: signed(a.allocated),
                        spent: signed(a.spent),
                        granted: signed(a.granted),
                        returned: signed(a.returned),
                    };
                    (id.clone(), figures)
                })
                .collect();
            let summary = UnitSummary {
                initial_reserve,
                reserve: signed(book.reserve),
                overhead: signed(book.overhead_spent),
                spent: signed(book.spent()),
                milestones,
            };
            (unit.as_str().to_string(), summary)
        })
        .collect())
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
    Ok(Json(LedgerView { units, entries }))
}
