//! `POST /v1/tasks/{id}/shadow` starts a shadow run of a task with a candidate strategy;
//! `GET /v1/tasks/{id}/shadow` (with the shadow's id) shows both outcomes side by side.
//! See [`crate::engine::shadow`]: side-effecting tools of the shadow reach only their sandbox.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::domain::task::SHADOW_OF;
use crate::domain::task::{Strategy, Task};
use crate::engine::shadow::{side_by_side, start_shadow_by};
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiJson, ApiPath, parse_task_id};
use crate::http::tasks::find_task;

/// The candidate strategy to run in shadow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartShadow {
    pub strategy: Strategy,
}

/// Starts a shadow copy of a task.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/shadow",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The task to copy.")),
    request_body = StartShadow,
    responses(
        (status = 201, description = "The shadow copy, queued; its side effects go to sandboxes only.", body = Task),
        (status = 400, description = "Malformed JSON, or an `id` that is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The task is itself a shadow.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the configured limit.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/json`.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A body of the wrong shape (an unknown strategy, an unknown field).", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn start(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiJson(request): ApiJson<StartShadow>,
) -> Result<(StatusCode, Json<Task>), ApiError> {
    let original = find_task(&state, &principal.tenant, parse_task_id(&id)?).await?;
    if original.metadata.get(SHADOW_OF).is_some() {
        return Err(ApiError::Conflict("a shadow run cannot be shadowed".into()));
    }
    let by = Some(principal.key_id.as_str());
    let copy = start_shadow_by(
        state.store.as_ref(),
        &original,
        request.strategy,
        by,
        state.clock.now(),
    )
    .await?;
    tracing::info!(key_id = %principal.key_id, tenant = %principal.tenant,
        task_id = %original.id, shadow_id = %copy.id, "shadow run started");
    Ok((StatusCode::CREATED, Json(copy)))
}

/// A shadow run and its original, side by side.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/shadow",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The shadow task's id.")),
    responses(
        (status = 200, description = "`original` and `shadow`: status, verified, spend, reason.", body = Object),
        (status = 400, description = "An `id` that is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task, or not a shadow run.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn compare(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let tenant = principal.tenant.as_str();
    let shadow = find_task(&state, tenant, parse_task_id(&id)?).await?;
    let original = shadow
        .metadata
        .get(SHADOW_OF)
        .and_then(Value::as_str)
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .ok_or_else(|| ApiError::NotFound(format!("task {} is not a shadow run", shadow.id)))?;
    let both = side_by_side(state.store.as_ref(), tenant, original, shadow.id).await?;
    Ok(Json(both))
}
