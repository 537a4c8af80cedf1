//! The tool registry: what operators allow cairn to call, loaded once at start.
//!
//! A registration is checked completely before the service starts (name, URL, timeout, and that
//! the argument schema compiles), and a bad one is refused with a message naming the tool and
//! the field, because a typo found at the first call would fail a task instead of a deploy.
//! The file format (TOML, `[[tools]]` tables) is documented in `docs/tools.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
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

use check::check_spec;

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    #[serde(default)]
    tools: Vec<toml::Value>,
}

impl ToolRegistry {
    /// Loads and checks a registry file: TOML, or JSON when the name ends in `.json`.
    pub fn load(path: &Path) -> Result<ToolRegistry, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let origin = path.display().to_string();
        if path.extension().is_some_and(|ext| ext == "json") {
            Self::parse_json(&text, &origin)
        } else {
            Self::parse_toml(&text, &origin)
        }
    }

    /// Parses the JSON form, `{"tools": [...]}` (what the simulator serves).
    pub fn parse_json(text: &str, origin: &str) -> Result<ToolRegistry, RegistryError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct JsonFile {
            #[serde(default)]
            tools: Vec<Value>,
        }
        let file: JsonFile = serde_json::from_str(text).map_err(|error| RegistryError::Parse {
            origin: origin.to_string(),
            message: error.to_string(),
        })?;
        let mut specs = Vec::with_capacity(file.tools.len());
        for (index, entry) in file.tools.into_iter().enumerate() {
            let tool = entry
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("#{}", index + 1));
            let spec = serde_json::from_value::<ToolSpec>(entry).map_err(|error| {
                let message = error.to_string();
                RegistryError::Invalid {
                    origin: origin.to_string(),
                    field: field_in(&message).unwrap_or_else(|| "(entry)".into()),
                    tool,
                    message,
                }
            })?;
            specs.push(spec);
        }
        Self::from_specs(specs, origin)
    }

    /// Parses registry TOML; `origin` names the source in error messages.
    pub fn parse_toml(text: &str, origin: &str) -> Result<ToolRegistry, RegistryError> {
        let file: RegistryFile = toml::from_str(text).map_err(|error| RegistryError::Parse {
            origin: origin.to_string(),
            message: error.message().to_string(),
        })?;
        let mut specs = Vec::with_capacity(file.tools.len());
        for (index, entry) in file.tools.into_iter().enumerate() {
            let tool = entry
                .get("name")
                .and_then(toml::Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("#{}", index + 1));
            let spec = ToolSpec::deserialize(entry).map_err(|error| {
                let message = error.message().to_string();
                RegistryError::Invalid {
                    origin: origin.to_string(),
                    field: field_in(&message).unwrap_or_else(|| "(entry)".into()),
                    tool,
                    message,
                }
            })?;
            specs.push(spec);
        }
        Self::from_specs(specs, origin)
    }

    /// Checks and indexes specs given in code (the simulator's tools, tests).
    pub fn from_specs(specs: Vec<ToolSpec>, origin: &str) -> Result<ToolRegistry, RegistryError> {
        let mut tools = BTreeMap::new();
        for spec in specs {
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

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The field a serde message is about (`missing field `x``, `unknown field `x``).
fn field_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[tools]]
name = "search"
description = "Find text in the repository"
url = "http://127.0.0.1:9000/tools/search"
side_effects = false
idempotent = true
[tools.args_schema]
type = "object"
required = ["pattern"]
properties = { pattern = { type = "string" } }

[[tools]]
name = "edit_file"
description = "Replace text in a file"
url = "http://127.0.0.1:9000/tools/edit_file"
sandbox_url = "http://127.0.0.1:9001/tools/edit_file"
timeout_ms = 5000
side_effects = true
args_schema = { type = "object" }
"#;

    #[test]
    fn loads_a_good_registry() {
        let registry = ToolRegistry::parse_toml(GOOD, "tools.toml").expect("valid");
        assert_eq!(registry.len(), 2);
        let search = registry.get("search").expect("search");
        assert_eq!(search.spec.timeout_ms, 30_000);
        assert!(
            search
                .check_args(&serde_json::json!({"pattern": "db.url"}))
                .is_empty()
        );
        assert!(!search.check_args(&serde_json::json!({})).is_empty());
        let edit = registry.get("edit_file").expect("edit_file");
        assert!(edit.spec.side_effects && !edit.spec.idempotent);
    }

    #[test]
    fn bad_registrations_name_the_tool_and_field() {
        let cases = [
            (
                GOOD.replace("http://127.0.0.1:9000/tools/search", "ftp://x"),
                "search",
                "url",
            ),
            (
                GOOD.replace("timeout_ms = 5000", "timeout_ms = 0"),
                "edit_file",
                "timeout_ms",
            ),
            (
                GOOD.replace("side_effects = false\n", ""),
                "search",
                "side_effects",
            ),
            (
                GOOD.replace("idempotent = true", "idempotant = true"),
                "search",
                "idempotant",
            ),
            (
                GOOD.replace(
                    "idempotent = true",
                    "idempotent = true\nartifacts = [\"hits\", \"hits\"]",
                ),
                "search",
                "artifacts",
            ),
            (
                GOOD.replace("\"edit_file\"", "\"search\""),
                "search",
                "name",
            ),
            (
                GOOD.replace("type = \"object\"\nrequired", "type = 7\nrequired"),
                "search",
                "args_schema",
            ),
            (
                GOOD.replace("https://", "")
                    .replace("sandbox_url = \"http://", "sandbox_url = \"mailto://"),
                "edit_file",
                "sandbox_url",
            ),
        ];
        for (text, tool, field) in cases {
            let error = ToolRegistry::parse_toml(&text, "tools.toml").unwrap_err();
            let shown = error.to_string();
            assert!(
                shown.contains(&format!("{tool:?}")) && shown.contains(field),
                "expected tool {tool} and field {field} in: {shown}"
            );
        }
    }
}
