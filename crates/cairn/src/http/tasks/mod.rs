//! `/v1/tasks`: submit, read, list and cancel tasks.
//!
//! Every input is validated here, before the store is called, so a rejected request writes
//! nothing. Submitting with an `Idempotency-Key` is safe to retry: the first request answers
//! `202 Accepted`; a retry with the same key and the same body answers `200 OK` with the task the
//! first one created (the status tells a client which of the two happened); the same key with a
//! different body is a `409` `/problems/idempotency-conflict`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::domain::task::{Budget, BudgetRequest, NewTask, Strategy, Task, TaskStatus, is_blank};
use crate::engine::runtime::progress::progress_of;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::doc_schemas::{Metadata, StoreFailure};
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiJson, ApiPath, ApiQuery, parse_task_id};
use crate::http::tools_doc::TaskTools;
use crate::http::{cursor, idempotency};
use crate::store::{CancelOutcome, IdempotencyClaim, TaskQuery};

mod money;
mod tools;

/// Longest accepted goal, in characters (Unicode scalar values, what JSON Schema's `maxLength`
/// counts); at most 32 KiB of UTF-8.
pub const MAX_GOAL_CHARS: usize = 8192;
/// Largest accepted `metadata`, in bytes of compact JSON.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Page size when `limit` is absent.
pub const DEFAULT_PAGE_SIZE: i64 = 20;

/// The body of `POST /v1/tasks`. Unknown fields are refused, so a typo is never silently ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTaskRequest {
    /// What the task must achieve, in words: 1-8,192 characters, with no NUL and at least one
    /// character that is not whitespace, a control or an invisible character.
    // The pattern is [`CreateTaskRequest::validate`]'s goal rule: no NUL anywhere and at least
    // one character [`is_blank`] does not skip. The skipped ones are spelled out, since regex
    // engines disagree on `\s`: the controls and space (`\x00-\x20`, `\x7F-\x9F`), the rest of
    // Unicode White_Space (`\xA0`, `\u1680`, `\u2000-\u200A`, `\u2028`, `\u2029`, `\u202F`,
    // `\u205F`, `\u3000`) and `domain::task::INVISIBLE`. tests/api_fuzz.rs checks that the two agree.
    #[schema(
        min_length = 1,
        max_length = 8192,
        pattern = r"^[^\x00]*[^\x00-\x20\x7F-\xA0\u00AD\u1680\u180E\u2000-\u200D\u2028\u2029\u202F\u205F\u2060\u3000\uFEFF][^\x00]*$"
    )]
    pub goal: String,
    /// The total budget; every unit given positive and below its bound. A unit left out, or
    /// the whole budget, is the server's default budget's (`default_budget`).
    #[serde(default, deserialize_with = "crate::http::extract::optional_object")]
    pub budget: Option<BudgetRequest>,
    /// How to run the task; `auto` (the default) lets the gate decide.
    #[serde(default)]
    pub strategy: Option<Strategy>,
    /// Free-form JSON object kept with the task: at most 16 KiB as compact JSON, and no NUL
    /// character in any key or string.
    #[serde(default)]
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Value>,
    /// The registered tools the task may use (`GET /v1/tools` lists them), for least
    /// privilege: the planner offers only these and the executor calls no other. Omitted, every
    /// registered tool. At most 64 distinct names, each a registered tool.
    #[serde(default)]
    #[schema(value_type = Option<TaskTools>)]
    pub tools: Option<Vec<String>>,
    /// What a person must sign off before it runs: `plan` (each plan version's new or changed
    /// milestones), `steps` (every side-effecting call, with its resolved arguments) or `none`
    /// (the default). The operator's policy may ask for more, never for less.
    #[serde(default)]
    pub approval: Option<crate::domain::approval::ApprovalMode>,
}

impl CreateTaskRequest {
    /// Every rule the schema cannot express; all violations are reported at once.
    pub fn validate(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        if is_blank(&self.goal) {
            errors.push(
                "goal must not be empty (or only spaces and invisible characters)".to_string(),
            );
        } else if self.goal.chars().count() > MAX_GOAL_CHARS {
            errors.push(format!(
                "goal must be at most {MAX_GOAL_CHARS} characters, got {}",
                self.goal.chars().count()
            ));
        }
        // Postgres text and jsonb cannot hold NUL; refusing it here keeps it a 4xx.
        if self.goal.contains('\0') {
            errors.push("goal must not contain NUL characters".to_string());
        }
        // The default never fails validation, so only the units given can.
        let given = self.budget.unwrap_or_default().over(Budget::DEFAULT);
        if let Err(budget_errors) = given.validate() {
            errors.extend(budget_errors);
        }
        if let Some(metadata) = &self.metadata {
            if !metadata.is_object() {
                errors.push("metadata must be a JSON object".to_string());
            } else {
                let size = metadata.to_string().len();
                if size > MAX_METADATA_BYTES {
                    errors.push(format!(
                        "metadata must be at most {MAX_METADATA_BYTES} bytes of JSON, got {size}"
                    ));
                }
                if contains_nul(metadata) {
                    errors.push("metadata must not contain NUL characters".to_string());
                }
            }
        }
        errors.extend(self.tool_list_errors());
        match errors.len() {
            0 => Ok(()),
            1 => Err(ApiError::Validation {
                detail: errors[0].clone(),
                errors,
            }),
            n => Err(ApiError::Validation {
                detail: format!("{n} problems with the request; see `errors`"),
                errors,
            }),
        }
    }

    /// The budget the task gets: the units given, `default`'s for the rest.
    pub fn budget_over(&self, default: Budget) -> Budget {
        self.budget.unwrap_or_default().over(default)
    }

    /// The request with defaults filled in (`budget` is [`Self::budget_over`] the default): what
    /// the idempotency hash is computed over, so that an omitted `strategy` and an explicit
    /// `"auto"`, or an omitted budget and the default one spelled out, are the same request.
    fn canonical(&self, budget: Budget) -> Value {
        let mut canonical = json!({
            "goal": self.goal,
            "budget": budget,
            "strategy": self.strategy.unwrap_or_default(),
            "metadata": self.metadata.clone().unwrap_or_else(|| json!({})),
        });
        // Only when given, so that the hash of a request without a tool list is unchanged.
        if let (Some(tools), Some(object)) = (&self.tools, canonical.as_object_mut()) {
            object.insert("tools".into(), json!(tools));
        }
        let approval = self.approval.unwrap_or_default();
        if let (true, Some(object)) = (
            approval != crate::domain::approval::ApprovalMode::None,
            canonical.as_object_mut(),
        ) {
            object.insert("approval".into(), json!(approval));
        }
        canonical
    }
}

fn contains_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map
            .iter()
            .any(|(key, item)| key.contains('\0') || contains_nul(item)),
        _ => false,
    }
}

/// Submits a task.
#[utoipa::path(
    post,
    path = "/v1/tasks",
    tag = "tasks",
    request_body = CreateTaskRequest,
    params(
        ("Idempotency-Key" = Option<String>, Header, nullable = false, min_length = 1, max_length = 255, pattern = r"^[!-~]{1,255}$",
         description = "Makes the request safe to retry: 1-255 printable ASCII characters. The same key with the same body returns the task the first request created (200); with another body, 409."),
    ),
    responses(
        (status = 202, description = "The task was created and queued.", body = Task,
         headers(("Location" = String, description = "The task's URL."))),
        (status = 200, description = "An Idempotency-Key replay: the task created by the first request.", body = Task,
         headers(("Location" = String, description = "The task's URL."))),
        (status = 400, description = "Malformed JSON or an invalid Idempotency-Key.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The Idempotency-Key was used with a different body.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the configured limit.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as application/json.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Wrong types, unknown or missing fields, or values out of range.", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The tenant has spent its cap for the period (`/problems/spend-cap-reached`); nothing was written.", body = Problem, content_type = "application/problem+json",
         headers(("Retry-After" = u32, description = "Seconds until the period ends."))),
        StoreFailure,
    )
)]
pub async fn create_task(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    ApiJson(request): ApiJson<CreateTaskRequest>,
) -> Result<Response, ApiError> {
    let key = idempotency::key_from_headers(&headers)?;
    request.validate()?;
    request.check_tools(&state.tools.current())?;
    let budget = request.budget_over(state.settings.default_budget);
    money::check(&state, &budget)?;
    money::tenant_room(&state, &principal.tenant).await?;
    let idempotency = key.map(|key| IdempotencyClaim {
        key,
        request_hash: idempotency::canonical_hash(&request.canonical(budget)),
    });
    let new = NewTask {
        id: uuid::Uuid::now_v7(),
        tenant_id: principal.tenant.clone(),
        goal: request.goal,
        strategy: request.strategy.unwrap_or_default(),
        budget,
        metadata: request.metadata.unwrap_or_else(|| json!({})),
        tools: request.tools,
        approval: request.approval.unwrap_or_default(),
    };
    let by = Some(principal.key_id.as_str());
    let created = state
        .store
        .create_task_by(new, idempotency, by, state.clock.now())
        .await?;
    if created.created {
        tracing::info!(key_id = %principal.key_id, tenant = %principal.tenant,
            task_id = %created.task.id, "task submitted");
        state.meters.task_submitted(created.task.strategy.as_str());
    }
    let status = if created.created {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let location = format!("/v1/tasks/{}", created.task.id);
    let mut response = (status, Json(created.task)).into_response();
    // A UUID path is always a valid header value; the guard only avoids a panic path.
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// Reads one task: status, strategy, budget, timestamps, current plan version, progress, result.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 200, description = "The task.", body = Task),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn get_task(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Task>, ApiError> {
    let id = parse_task_id(&id)?;
    let mut task = find_task(&state, &principal.tenant, id).await?;
    let checkpoint = state.store.get_checkpoint(&principal.tenant, id).await?;
    task.progress = checkpoint.as_ref().and_then(progress_of);
    Ok(Json(task))
}

/// Loads a task of the caller's tenant or answers 404; another tenant's task reads exactly like
/// an unknown id.
pub async fn find_task(state: &AppState, tenant: &str, id: uuid::Uuid) -> Result<Task, ApiError> {
    state
        .store
        .get_task(tenant, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("task {id} does not exist")))
}

/// Query parameters of `GET /v1/tasks`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListTasksQuery {
    /// Only tasks in this status.
    pub status: Option<TaskStatus>,
    /// Page size: 1 up to the configured maximum, 100 by default (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// `next_cursor` from the previous page (`c1.` and 32 hex digits).
    #[param(pattern = r"^c1\.[0-9a-fA-F]{32}$")]
    pub cursor: Option<String>,
}

/// One page of tasks, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskPage {
    pub items: Vec<Task>,
    /// Pass as `cursor` to read the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// Lists tasks, newest first, with keyset pagination.
#[utoipa::path(
    get,
    path = "/v1/tasks",
    tag = "tasks",
    params(ListTasksQuery),
    responses(
        (status = 200, description = "A page of tasks.", body = TaskPage),
        (status = 400, description = "An invalid status, limit or cursor.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn list_tasks(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<ListTasksQuery>,
) -> Result<Json<TaskPage>, ApiError> {
    let max = state.settings.max_page_size;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE_SIZE.min(max));
    if !(1..=max).contains(&limit) {
        return Err(ApiError::InvalidParameter(format!(
            "limit must be between 1 and {max}, got {limit}"
        )));
    }
    let before = query.cursor.as_deref().map(cursor::decode).transpose()?;
    // One extra row tells whether another page exists without a second query.
    let store_query = TaskQuery {
        status: query.status,
        before,
        limit: limit + 1,
    };
    let mut items = state
        .store
        .list_tasks(&principal.tenant, &store_query)
        .await?;
    let more = items.len() as i64 > limit;
    items.truncate(limit as usize);
    let next_cursor = match items.last() {
        Some(last) if more => Some(cursor::encode(last.id)),
        _ => None,
    };
    Ok(Json(TaskPage { items, next_cursor }))
}

/// Cancels a queued or running task. A running worker loses its lease at its next write.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/cancel",
    tag = "tasks",
    params(("id" = uuid::Uuid, Path, description = "The task id.")),
    responses(
        (status = 200, description = "The task, now cancelled.", body = Task),
        (status = 400, description = "The id is not a UUID.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The task had already ended.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    )
)]
pub async fn cancel_task(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Task>, ApiError> {
    let id = parse_task_id(&id)?;
    let (tenant, by) = (&principal.tenant, Some(principal.key_id.as_str()));
    match state
        .store
        .cancel_task_by(tenant, id, by, state.clock.now())
        .await?
    {
        CancelOutcome::Cancelled(task) => {
            tracing::info!(key_id = %principal.key_id, tenant = %tenant, task_id = %id,
                "task cancelled");
            state
                .meters
                .task_ended(TaskStatus::Cancelled, task.strategy.as_str());
            Ok(Json(task))
        }
        CancelOutcome::NotFound => Err(ApiError::NotFound(format!("task {id} does not exist"))),
        CancelOutcome::AlreadyTerminal(task) => Err(ApiError::Conflict(format!(
            "task {id} has already ended with status {}; only queued or running tasks can be \
             cancelled",
            task.status.as_str()
        ))),
    }
}

#[cfg(test)]
mod tests;
