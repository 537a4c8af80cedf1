//! `POST /v1/tasks/{id}/stream-token`: a short-lived token for one task's event stream.
//!
//! Browsers' `EventSource` cannot send an `Authorization` header, and an API key must never sit
//! in a URL (proxies and browser history keep URLs). So a client with a `read` key asks for a
//! token bound to one task, valid for [`TTL_SECONDS`], and opens
//! `GET /v1/tasks/{id}/events?token=...`. Only the token's SHA-256 is stored; the token dies
//! with its key's revocation too.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiPath, parse_task_id};
use crate::http::tasks::find_task;
use crate::store::keys::{NewStreamToken, generate_stream_token};

/// How long a stream token is valid.
pub const TTL_SECONDS: i64 = 300;

/// A token for one task's event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StreamTokenView {
    /// Pass as `?token=` to the events route of this task (and only this task).
    pub token: String,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub expires_at: DateTime<Utc>,
    /// The events URL with the token, ready for `new EventSource(url)`.
    pub url: String,
}

/// Issues a stream token for a task's events.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/stream-token",
    tag = "events",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 201, description = "A token for `GET /v1/tasks/{id}/events?token=`, valid for 5 minutes.", body = StreamTokenView),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, Json<StreamTokenView>), ApiError> {
    let id = parse_task_id(&id)?;
    let task = find_task(&state, &principal.tenant, id).await?;
    let (token, token_hash) = generate_stream_token().map_err(ApiError::internal)?;
    let now = state.clock.now();
    let expires_at = now + Duration::seconds(TTL_SECONDS);
    let new = NewStreamToken {
        token_hash,
        task_id: task.id,
        tenant_id: principal.tenant.clone(),
        key_id: principal.key_id.clone(),
        expires_at,
    };
    state.store.create_stream_token(new, now).await?;
    let url = format!("/v1/tasks/{}/events?token={token}", task.id);
    Ok((
        StatusCode::CREATED,
        Json(StreamTokenView {
            token,
            expires_at,
            url,
        }),
    ))
}
