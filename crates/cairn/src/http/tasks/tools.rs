//! A task's tool list: the registered tools its submitter allows it, for least privilege.
//! Its shape is checked with the rest of the request; its names against the registry the API
//! serves (`GET /v1/tools`). An API that serves no registry (an embedded evaluation) leaves
//! the names to the engine, which offers a task only the registered tools it names.

use std::collections::BTreeSet;

use super::CreateTaskRequest;
use crate::http::error::ApiError;
use crate::http::tools_doc::MAX_TASK_TOOLS;
use crate::tools::ToolRegistry;

/// Longest tool name.
const MAX_TOOL_NAME: usize = 128;

impl CreateTaskRequest {
    /// What is wrong with the tool list's shape: too many, repeated, empty or overlong names.
    pub(super) fn tool_list_errors(&self) -> Vec<String> {
        let Some(tools) = &self.tools else {
            return Vec::new();
        };
        let mut errors = Vec::new();
        if tools.len() > MAX_TASK_TOOLS {
            errors.push(format!(
                "tools must list at most {MAX_TASK_TOOLS} names, got {}",
                tools.len()
            ));
        }
        let mut seen = BTreeSet::new();
        let mut repeated = BTreeSet::new();
        for name in tools.iter().map(String::as_str) {
            if name.is_empty() || name.chars().count() > MAX_TOOL_NAME || name.contains('\0') {
                errors.push(format!(
                    "tools: {:?} is not a tool name (1-{MAX_TOOL_NAME} characters)",
                    name.chars().take(40).collect::<String>()
                ));
            } else if !seen.insert(name) && repeated.insert(name) {
                errors.push(format!("tools: {name:?} is listed more than once"));
            }
        }
        errors
    }

    /// Every listed name must be a registered tool (when the API serves a registry).
    pub(super) fn check_tools(&self, registry: &ToolRegistry) -> Result<(), ApiError> {
        let (Some(tools), false) = (&self.tools, registry.is_empty()) else {
            return Ok(());
        };
        let unknown: Vec<String> = tools
            .iter()
            .filter(|name| !registry.contains(name))
            .map(|name| format!("tools: {name:?} is not a registered tool (see GET /v1/tools)"))
            .collect();
        match unknown.first() {
            None => Ok(()),
            Some(first) => Err(ApiError::Validation {
                detail: first.clone(),
                errors: unknown,
            }),
        }
    }
}
