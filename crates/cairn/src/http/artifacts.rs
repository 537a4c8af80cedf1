//! `GET /v1/tasks/{id}/artifacts`: what a task's milestones produced, as they were recorded
//! (an artifact is a named value a step's tool call returned; a milestone's checks read them).
//! A planned task's result is these; the direct route and the baselines also answer in words.

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
use crate::store::Artifact;

/// A task's artifacts, oldest first; a name recorded twice by one milestone appears twice, the
/// later value being the one its checks read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ArtifactList {
    pub items: Vec<Artifact>,
}

/// Lists a task's artifacts.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/artifacts",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 200, description = "The artifacts, oldest first (empty before any step produced one).", body = ArtifactList),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn list_artifacts(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ArtifactList>, ApiError> {
    let id = parse_task_id(&id)?;
    // 404 for an unknown task (or another tenant's), rather than an empty list.
    find_task(&state, &principal.tenant, id).await?;
    let items = state.store.list_artifacts(&principal.tenant, id).await?;
    Ok(Json(ArtifactList { items }))
}
