//! `/v1/tasks/{id}/plans`: the immutable plan versions of a task, each with the reason it was
//! written. Versions are never updated in place, so these responses never change once served.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiPath, parse_task_id};
use crate::http::tasks::find_task;
use crate::store::PlanVersionRecord;

/// Every plan version of a task, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlanVersionList {
    pub items: Vec<PlanVersionRecord>,
}

/// Lists a task's plan versions.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/plans",
    tag = "plans",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 200, description = "The plan versions, oldest first (empty before planning).", body = PlanVersionList),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn list_plans(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<PlanVersionList>, ApiError> {
    let id = parse_task_id(&id)?;
    // 404 for an unknown task (or another tenant's), rather than an empty list.
    find_task(&state, &principal.tenant, id).await?;
    let items = state
        .store
        .list_plan_versions(&principal.tenant, id)
        .await?;
    Ok(Json(PlanVersionList { items }))
}

/// Reads one plan version.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/plans/{version}",
    tag = "plans",
    params(
        ("id" = uuid::Uuid, Path, description = "The task id."),
        ("version" = i32, Path, minimum = 1, description = "The plan version, from 1."),
    ),
    responses(
        (status = 200, description = "The plan version.", body = PlanVersionRecord),
        (status = 400, description = "The id is not a UUID or the version not a positive integer.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task or version.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn get_plan(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, version)): ApiPath<(String, String)>,
) -> Result<Json<PlanVersionRecord>, ApiError> {
    find_plan_version(&state, &principal.tenant, &id, &version)
        .await
        .map(Json)
}

/// Parses the `{id}` and `{version}` path parameters and reads that plan version of a task the
/// caller's tenant owns: 400 for a malformed id or version, 404 for an unknown task or version.
pub(crate) async fn find_plan_version(
    state: &AppState,
    tenant: &str,
    id: &str,
    version: &str,
) -> Result<PlanVersionRecord, ApiError> {
    let id = parse_task_id(id)?;
    let version = match version.parse::<i32>() {
        Ok(version) if version >= 1 => version,
        _ => {
            return Err(ApiError::InvalidParameter(format!(
                "path parameter `version` must be a positive integer, got {version:?}"
            )));
        }
    };
    find_task(state, tenant, id).await?;
    state
        .store
        .get_plan_version(tenant, id, version)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("task {id} has no plan version {version}")))
}
