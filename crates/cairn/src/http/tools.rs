//! `GET /v1/tools`: the tools operators registered, as cairn will call them, and the MCP
//! servers they come from; `POST /v1/tools/refresh`: list those servers again now.
//!
//! Read-only on purpose: tools are registered in the registry file by operators, never through
//! the API, so a goal submitter cannot point cairn at an arbitrary URL.

use std::borrow::Cow;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::http::AppState;
use crate::tools::mcp::McpServerStatus;
use crate::tools::{ToolSource, ToolSpec};

/// One registered tool and where it comes from. Its schema is [`ToolSpec`]'s with `source`
/// added (see [`ListedTool::schema`]): the registry file refuses unknown fields, so a derived
/// `allOf` of the two would refuse the `source` it lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedTool {
    #[serde(flatten)]
    pub spec: ToolSpec,
    pub source: ToolSource,
}

impl PartialSchema for ListedTool {
    fn schema() -> RefOr<Schema> {
        let mut schema = ToolSpec::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.description = Some("One registered tool and where it comes from.".into());
            object.properties.insert(
                "source".into(),
                RefOr::Ref(Ref::from_schema_name(ToolSource::name())),
            );
            object.required.push("source".into());
        }
        schema
    }
}

impl ToSchema for ListedTool {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ListedTool")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((ToolSource::name().into_owned(), ToolSource::schema()));
    }
}

/// Every registered tool, sorted by name, and the MCP servers the registry names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolList {
    pub items: Vec<ListedTool>,
    /// The MCP servers, reachable or not, with what their last listing gave.
    #[serde(default)]
    pub servers: Vec<McpServerStatus>,
}

fn listed(state: &AppState) -> ToolList {
    ToolList {
        items: state
            .tools
            .current()
            .tools()
            .map(|tool| ListedTool {
                spec: tool.spec.clone(),
                source: tool.source.clone(),
            })
            .collect(),
        servers: state.tools.servers(),
    }
}

/// Lists the registered tools.
#[utoipa::path(
    get,
    path = "/v1/tools",
    tag = "tools",
    responses(
        (status = 200, description = "The registered tools with their argument schemas and sources, sorted by name; `simulated` marks the built-in simulator's. `servers` reports each MCP server.", body = ToolList),
    )
)]
pub async fn list_tools(State(state): State<AppState>) -> Json<ToolList> {
    Json(listed(&state))
}

/// Lists every MCP server's tools again now (admin).
#[utoipa::path(
    post,
    path = "/v1/tools/refresh",
    tag = "tools",
    responses(
        (status = 200, description = "The registry after every MCP server was asked for its tools; a server that did not answer is reported in `servers` and keeps the tools it listed before.", body = ToolList),
    )
)]
pub async fn refresh_tools(State(state): State<AppState>) -> Json<ToolList> {
    state.tools.refresh().await;
    Json(listed(&state))
}
