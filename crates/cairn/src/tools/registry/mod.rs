//! The tool registry: what operators allow cairn to call, loaded once at start.
//!
//! A registration is checked completely before the service starts (name, URL, timeout, and that
//! the argument schema compiles), and a bad one is refused with a message naming the tool and
//! the field, because a typo found at the first call would fail a task instead of a deploy.
//! The file format (TOML, `[[tools]]` tables) is documented in `docs/tools.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jsonschema::Validator;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::schema;

/// One registered tool, as written in the registry file and shown by `GET /v1/tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Unique name: letters, digits, `_`, `-` and `.`; what plans refer to.
    pub name: String,
    pub description: String,
    /// JSON Schema the call's `args` must match; checked before any request is sent.
    #[schema(value_type = Object)]
    pub args_schema: Value,
    /// Where calls are POSTed.
    pub url: String,
    /// Per-call timeout in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Whether a call changes the world. Required: side-effecting calls get receipts, and the
    /// gate plans any goal that needs one.
    pub side_effects: bool,
    /// Whether repeating a call with the same arguments is harmless.
    #[serde(default)]
    pub idempotent: bool,
    /// Used instead of `url` in shadow runs, so side effects land in a sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_url: Option<String>,
    /// True for tools served by cairn's simulator.
    #[serde(default)]
    pub simulated: bool,
    /// The names of the artifacts the tool's answers may carry (`artifacts` of its answer).
    /// Declared, they are shown to the planner, and a plan's check may name only artifacts its
    /// milestone's tools declare; undeclared (empty), any name is accepted, as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
}

mod check;
mod file;
mod shared;

use check::check_spec;
pub(crate) use check::check_url;
pub use file::ToolsFile;
pub use shared::SharedRegistry;

/// Where a registered tool comes from, as `GET /v1/tools` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolSource {
    /// A `[[tools]]` entry of the registry file (or the simulator's own tools).
    File,
    /// A tool an MCP server listed: `tool` is its name on `server`.
    Mcp { server: String, tool: String },
}

/// The field-level checks and the schema compilation a registration must pass; returns the
/// offending field and why.
pub fn checked(spec: &ToolSpec) -> Result<(), (&'static str, String)> {
    check_spec(spec)?;
    schema::compile(&spec.args_schema)
        .map(|_| ())
        .map_err(|error| ("args_schema", format!("not a valid JSON Schema: {error}")))
}

fn default_timeout_ms() -> u64 {
    30_000
}

/// Longest per-call timeout accepted: ten minutes.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot read tool registry {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("tool registry {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("tool registry {origin}: tool {tool:?}: field {field}: {message}")]
    Invalid {
        origin: String,
        tool: String,
        field: String,
        message: String,
    },
}

/// A registered tool with its compiled argument schema.
#[derive(Clone)]
pub struct RegisteredTool {
    pub spec: ToolSpec,
    pub source: ToolSource,
    validator: Arc<Validator>,
}

impl RegisteredTool {
    /// The validation messages for `args` (empty when valid).
    pub fn check_args(&self, args: &Value) -> Vec<String> {
        schema::messages(&self.validator, args)
    }
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// All registered tools, by name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
}

impl ToolRegistry {
    /// Checks and indexes specs given in code (the simulator's tools, tests).
    pub fn from_specs(specs: Vec<ToolSpec>, origin: &str) -> Result<ToolRegistry, RegistryError> {
        let sourced = specs.into_iter().map(|spec| (spec, ToolSource::File));
        Self::from_sourced(sourced.collect(), origin)
    }

    /// Checks and indexes specs, each with where it comes from.
    pub fn from_sourced(
        specs: Vec<(ToolSpec, ToolSource)>,
        origin: &str,
    ) -> Result<ToolRegistry, RegistryError> {
        let mut tools = BTreeMap::new();
        for (spec, source) in specs {
            let invalid = |field: &str, message: String| RegistryError::Invalid {
                origin: origin.to_string(),
                tool: spec.name.clone(),
                field: field.to_string(),
                message,
            };
            check_spec(&spec).map_err(|(field, message)| invalid(field, message))?;
            if tools.contains_key(&spec.name) {
                return Err(invalid("name", "registered twice".into()));
            }
            let validator = schema::compile(&spec.args_schema).map_err(|error| {
                invalid("args_schema", format!("not a valid JSON Schema: {error}"))
            })?;
            tools.insert(
                spec.name.clone(),
                RegisteredTool {
                    spec,
                    source,
                    validator: Arc::new(validator),
                },
            );
        }
        Ok(ToolRegistry { tools })
    }

    /// Adds the tools of `other`; a name in both is an error.
    pub fn merge(mut self, other: ToolRegistry) -> Result<ToolRegistry, RegistryError> {
        for (name, tool) in other.tools {
            if self.tools.contains_key(&name) {
                return Err(RegistryError::Invalid {
                    origin: "merged registries".into(),
                    tool: name,
                    field: "name".into(),
                    message: "registered twice".into(),
                });
            }
            self.tools.insert(name, tool);
        }
        Ok(self)
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Tool names, sorted: what plan validation checks `tools` against.
    pub fn names(&self) -> BTreeSet<String> {
        self.tools.keys().cloned().collect()
    }

    /// Specs, sorted by name.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values().map(|tool| &tool.spec)
    }

    /// Registered tools with their sources, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

#[cfg(test)]
mod tests;
