//! `POST /v1/tasks/{id}/messages`: a person steers a running task without restarting it;
//! `GET` lists what was sent. The engine takes a message at its next durable point
//! (`crate::engine::planner::steering`): a constraint the plan did not know makes a new plan
//! version with reason `new_constraint`, keeping finished work.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::message::{MAX_TASK_MESSAGES, MessageRequest, TaskMessage};
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiJson, ApiPath, parse_task_id};
use crate::http::tasks::find_task;
use crate::store::{PostMessage, PostOutcome};

/// A task's messages, in the order they were sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageList {
    pub items: Vec<TaskMessage>,
}

/// Sends a running (or queued) task a message; a `constraint` is raised as a person's at the
/// engine's next durable point.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/messages",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    request_body = MessageRequest,
    responses(
        (status = 202, description = "The message is committed; the engine takes it at its next durable point (a `task.message` event).", body = TaskMessage),
        (status = 400, description = "The id is not a UUID, or malformed JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The task has ended, its strategy takes no messages, or it holds the most messages a task takes.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the configured limit.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as application/json.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Wrong types, unknown or missing fields, or an empty or too long text.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn post_message(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiJson(request): ApiJson<MessageRequest>,
) -> Result<(StatusCode, Json<TaskMessage>), ApiError> {
    let id = parse_task_id(&id)?;
    let text = request
        .checked_text()
        .map_err(|detail| ApiError::Validation {
            errors: vec![detail.clone()],
            detail,
        })?;
    let tenant = principal.tenant.as_str();
    let post = PostMessage {
        tenant_id: tenant,
        task_id: id,
        kind: request.kind,
        text: &text,
        author: Some(principal.key_id.as_str()),
        limit: MAX_TASK_MESSAGES,
        now: state.clock.now(),
    };
    match state.store.post_message(post).await? {
        PostOutcome::Posted(message) => {
            tracing::info!(key_id = %principal.key_id, tenant = %tenant, task_id = %id,
                message = message.seq, "message sent to a task");
            Ok((StatusCode::ACCEPTED, Json(message)))
        }
        PostOutcome::NotFound => Err(ApiError::NotFound(format!("task {id} does not exist"))),
        PostOutcome::NotPlanned(strategy) => Err(ApiError::Conflict(format!(
            "task {id} runs the {} strategy, which takes no messages; only tasks planned by \
             cairn (v2, direct, auto) can be steered",
            strategy.as_str()
        ))),
        PostOutcome::Finished(status) => Err(ApiError::Conflict(format!(
            "task {id} has already ended with status {}; only queued or running tasks take \
             messages",
            status.as_str()
        ))),
        PostOutcome::Full { limit } => Err(ApiError::Conflict(format!(
            "task {id} already holds {limit} messages, the most one task takes"
        ))),
    }
}

/// Lists the messages sent to a task.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/messages",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 200, description = "The task's messages, oldest first.", body = MessageList),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn list_messages(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<MessageList>, ApiError> {
    let id = parse_task_id(&id)?;
    let tenant = principal.tenant.as_str();
    find_task(&state, tenant, id).await?;
    let items = state.store.list_messages(tenant, id, 0).await?;
    Ok(Json(MessageList { items }))
}
