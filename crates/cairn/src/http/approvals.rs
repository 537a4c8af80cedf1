//! `GET /v1/tasks/{id}/approvals`: what a task asked people to sign off, and what they decided;
//! `POST /v1/tasks/{id}/approvals/{approval}`: a decision on the pending request, bound to its
//! digest (the engine side is `crate::engine::runtime::approvals`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::approval::{
    Approval, ApprovalKind, ApprovalState, Decision, DecisionRequest, MAX_COMMENT_CHARS,
};
use crate::domain::task::is_blank;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::StoreFailure;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiJson, ApiPath, parse_task_id};
use crate::http::tasks::find_task;
use crate::store::approvals::{Decide, DecideOutcome};

/// A task's approval requests, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalList {
    pub items: Vec<Approval>,
}

/// Lists a task's approval requests.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/approvals",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 200, description = "The task's approval requests, oldest first; a waiting task's last one is `pending`.", body = ApprovalList),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn list_approvals(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ApprovalList>, ApiError> {
    let id = parse_task_id(&id)?;
    let tenant = principal.tenant.as_str();
    find_task(&state, tenant, id).await?;
    let items = state.store.list_approvals(tenant, id).await?;
    Ok(Json(ApprovalList { items }))
}

fn invalid(detail: String) -> ApiError {
    ApiError::Validation {
        errors: vec![detail.clone()],
        detail,
    }
}

/// The comment as it is kept, or why it is refused.
fn checked_comment(request: &DecisionRequest) -> Result<Option<String>, ApiError> {
    let comment = request.comment.as_deref().map(str::trim);
    if let Some(comment) = comment {
        if comment.chars().count() > MAX_COMMENT_CHARS {
            return Err(invalid(format!(
                "comment must be at most {MAX_COMMENT_CHARS} characters"
            )));
        }
        if comment.contains('\0') {
            return Err(invalid("comment must not contain a NUL character".into()));
        }
    }
    let comment = comment.filter(|c| !is_blank(c)).map(str::to_string);
    if request.decision == Decision::Revise && comment.is_none() {
        return Err(invalid(
            "a revise needs a comment: it is what the planner is asked to change".into(),
        ));
    }
    Ok(comment)
}

/// Parses the request number from the path.
fn approval_number(text: &str) -> Result<u32, ApiError> {
    text.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
        ApiError::InvalidParameter(format!(
            "path parameter `approval` must be a request number from 1, got {text:?}"
        ))
    })
}

/// Decides a task's pending approval request.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/approvals/{approval}",
    tag = "tasks",
    params(
        ("id" = uuid::Uuid, Path, description = "The task id."),
        ("approval" = u32, Path, minimum = 1, description = "The request's number, from 1."),
    ),
    request_body = DecisionRequest,
    responses(
        (status = 200, description = "Decided; the task is queued again and acts on it (approve: runs what was signed off; reject: a call is refused and repaired, a plan ends the task; revise: plans again with the comment).", body = Approval),
        (status = 400, description = "The id or request number is malformed, or malformed JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task or request.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The digest is not the pending request's, the request was already decided or expired, or the task no longer waits.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the configured limit.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as application/json.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Wrong types, unknown or missing fields; on the pending request with its digest, a revise of calls or without a comment, or a comment with a NUL.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn decide(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, approval)): ApiPath<(String, String)>,
    ApiJson(request): ApiJson<DecisionRequest>,
) -> Result<Json<Approval>, ApiError> {
    let id = parse_task_id(&id)?;
    let approval = approval_number(&approval)?;
    let tenant = principal.tenant.as_str();
    let digest = request.digest.trim();
    // What the store would refuse is answered first: a decision on something that is not
    // pending, or not what it names, is a conflict whatever its comment says.
    let listed = state.store.list_approvals(tenant, id).await?;
    let found = listed.iter().find(|a| a.id == approval);
    let early = match found {
        None => Some(DecideOutcome::NotFound),
        Some(a) if a.state != ApprovalState::Pending => Some(DecideOutcome::NotPending(a.state)),
        Some(a) if a.digest != digest => Some(DecideOutcome::Stale),
        Some(_) => None,
    };
    if let Some(outcome) = early {
        return Err(refused(outcome, id, approval));
    }
    if request.decision == Decision::Revise && found.is_some_and(|a| a.kind == ApprovalKind::Steps)
    {
        return Err(invalid(
            "revise applies to a plan; a call is approved or rejected".into(),
        ));
    }
    let comment = checked_comment(&request)?;
    let decide = Decide {
        tenant_id: tenant,
        task_id: id,
        approval,
        decision: request.decision,
        digest,
        comment: comment.as_deref(),
        by: principal.key_id.as_str(),
        now: state.clock.now(),
    };
    match state.store.decide_approval(decide).await? {
        DecideOutcome::Decided(decided) => {
            tracing::info!(key_id = %principal.key_id, tenant = %tenant, task_id = %id,
                approval, state = decided.state.as_str(), "approval decided");
            Ok(Json(decided))
        }
        outcome => Err(refused(outcome, id, approval)),
    }
}

/// Why a decision was not taken, in words.
fn refused(outcome: DecideOutcome, id: uuid::Uuid, approval: u32) -> ApiError {
    match outcome {
        DecideOutcome::NotFound | DecideOutcome::Decided(_) => {
            ApiError::NotFound(format!("task {id} has no approval request {approval}"))
        }
        DecideOutcome::NotPending(done) => ApiError::Conflict(format!(
            "approval request {approval} of task {id} is already {}; nothing was changed",
            done.as_str()
        )),
        DecideOutcome::NotWaiting(status) => ApiError::Conflict(format!(
            "task {id} is {}, not waiting for approval; nothing was changed",
            status.as_str()
        )),
        DecideOutcome::Stale => ApiError::Conflict(format!(
            "the digest does not match approval request {approval} of task {id}: what you \
             decided on is not what would run; read GET /v1/tasks/{id}/approvals again"
        )),
    }
}
