//! `GET /v1/tasks/{id}/plans/{version}/diff`: what a plan version changed from the one before.
//!
//! Every repair writes a version with its reason and cause; this answers "what did that repair
//! change?" structurally (milestones added, removed, changed field by field), using
//! [`crate::domain::plan::diff`]. Version 1 is compared with an empty plan, so it lists every
//! milestone as added.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::domain::plan::diff::{PlanDiff, diff_values};
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::ApiPath;
use crate::http::plans::find_plan_version;

/// The difference between version `version` and the version before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlanDiffView {
    pub version: i32,
    /// The version compared against (`null` for version 1).
    pub previous: Option<i32>,
    /// Why `version` was written.
    pub reason: String,
    /// The `seq` of the event that caused it.
    pub caused_by_seq: Option<i64>,
    pub diff: PlanDiff,
}

/// Diffs one plan version against the one before it.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/plans/{version}/diff",
    tag = "plans",
    params(
        ("id" = uuid::Uuid, Path, description = "The task id."),
        ("version" = i32, Path, minimum = 1, description = "The plan version, from 1."),
    ),
    responses(
        (status = 200, description = "The structural difference from the previous version.", body = PlanDiffView),
        (status = 400, description = "The id is not a UUID or the version not a positive integer.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task or version.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn plan_diff(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, version)): ApiPath<(String, String)>,
) -> Result<Json<PlanDiffView>, ApiError> {
    let tenant = principal.tenant.as_str();
    let current = find_plan_version(&state, tenant, &id, &version).await?;
    let (id, version) = (current.task_id, current.version);
    let previous = if version > 1 {
        state
            .store
            .get_plan_version(tenant, id, version - 1)
            .await?
    } else {
        None
    };
    let before: Value = previous
        .as_ref()
        .map(|p| p.plan.clone())
        .unwrap_or_else(|| json!({"milestones": []}));
    let diff = diff_values(&before, &current.plan).map_err(|errors| {
        ApiError::Internal(format!(
            "stored plan version cannot be read: {}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ))
    })?;
    Ok(Json(PlanDiffView {
        version,
        previous: previous.map(|p| p.version),
        reason: current.reason,
        caused_by_seq: current.caused_by_seq,
        diff,
    }))
}
