//! `GET /v1/rollout` and `PUT /v1/rollout`: the share of `auto` tasks that runs on v2.
//!
//! Raising the share is refused (409) while the latest evaluation report shows a v2
//! regression, or when there is no report to check; lowering is always allowed (rolling back
//! must never be blocked). See [`crate::engine::rollout`].

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::engine::rollout::{RolloutError, RolloutSplit};
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::error::{ApiError, Problem};
use crate::http::extract::ApiJson;

/// The requested share of `auto` tasks on v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRollout {
    /// 0..=100 (a whole number; `50.0` is fifty).
    #[schema(minimum = 0, maximum = 100)]
    #[serde(deserialize_with = "crate::domain::whole::unsigned")]
    pub percent: u32,
}

/// The current rollout split.
#[utoipa::path(
    get,
    path = "/v1/rollout",
    tag = "stats",
    responses((status = 200, description = "The rollout percentage and this process's routing counts.", body = RolloutSplit))
)]
pub async fn get_rollout(State(state): State<AppState>) -> Json<RolloutSplit> {
    Json(state.rollout.split())
}

/// Changes the rollout percentage.
#[utoipa::path(
    put,
    path = "/v1/rollout",
    tag = "stats",
    request_body = SetRollout,
    responses(
        (status = 200, description = "The new split.", body = RolloutSplit),
        (status = 400, description = "Malformed JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Raising refused: the latest evaluation shows a v2 regression, or there is no evaluation report.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than the configured limit.", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/json`.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A body of the wrong shape (not an object, a wrong type, an unknown field) or a percentage outside 0..=100.", body = Problem, content_type = "application/problem+json")
    )
)]
pub async fn set_rollout(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(request): ApiJson<SetRollout>,
) -> Result<Json<RolloutSplit>, ApiError> {
    match state.rollout.set(request.percent) {
        Ok(split) => {
            tracing::info!(key_id = %principal.key_id, percent = request.percent,
                "rollout changed");
            Ok(Json(split))
        }
        Err(error @ RolloutError::OutOfRange(_)) => Err(ApiError::validation(error.to_string())),
        Err(error) => Err(ApiError::Conflict(error.to_string())),
    }
}
