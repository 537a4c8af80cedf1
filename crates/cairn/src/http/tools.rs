//! `GET /v1/tools`: the tools operators registered, as cairn will call them.
//!
//! Read-only on purpose: tools are registered in the registry file by operators, never through
//! the API, so a goal submitter cannot point cairn at an arbitrary URL.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::AppState;
use crate::tools::ToolSpec;

/// Every registered tool, sorted by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolList {
    pub items: Vec<ToolSpec>,
}

/// Lists the registered tools.
#[utoipa::path(
    get,
    path = "/v1/tools",
    tag = "tools",
    responses(
        (status = 200, description = "The registered tools with their argument schemas, sorted by name; `simulated` marks the built-in simulator's.", body = ToolList),
    )
)]
pub async fn list_tools(State(state): State<AppState>) -> Json<ToolList> {
    Json(ToolList {
        items: state.tools.specs().cloned().collect(),
    })
}
