//! Reading the registry file: `[[tools]]` (HTTP tools, checked here) and `[[mcp]]` (MCP
//! servers, checked by `crate::tools::mcp::config`). The format is documented in
//! `docs/tools.md`.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{RegistryError, ToolRegistry, ToolSpec};
use crate::tools::mcp::config::{self, McpServerFile, McpServerSpec};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    #[serde(default)]
    tools: Vec<toml::Value>,
    #[serde(default)]
    mcp: Vec<toml::Value>,
}

/// A registry file read whole: its own tools, and the MCP servers whose tools join them once
/// listed (`crate::tools::mcp`).
#[derive(Debug, Clone, Default)]
pub struct ToolsFile {
    pub registry: ToolRegistry,
    pub mcp: Vec<McpServerSpec>,
}

impl ToolsFile {
    /// Loads and checks a registry file: TOML, or JSON (`{"tools": [...]}`, no MCP servers)
    /// when the name ends in `.json`.
    pub fn load(path: &Path) -> Result<ToolsFile, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let origin = path.display().to_string();
        if path.extension().is_some_and(|ext| ext == "json") {
            Ok(ToolsFile {
                registry: ToolRegistry::parse_json(&text, &origin)?,
                mcp: Vec::new(),
            })
        } else {
            Self::parse_toml(&text, &origin, &|var| std::env::var(var).ok())
        }
    }

    /// Parses registry TOML; `env` reads the variables header values name.
    pub fn parse_toml(
        text: &str,
        origin: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ToolsFile, RegistryError> {
        let file: RegistryFile = toml::from_str(text).map_err(|error| RegistryError::Parse {
            origin: origin.to_string(),
            message: error.message().to_string(),
        })?;
        let mut specs = Vec::with_capacity(file.tools.len());
        for (index, entry) in file.tools.into_iter().enumerate() {
            specs.push(entry_of::<ToolSpec>(entry, index, origin)?);
        }
        let registry = ToolRegistry::from_specs(specs, origin)?;
        let mut mcp: Vec<McpServerSpec> = Vec::with_capacity(file.mcp.len());
        for (index, entry) in file.mcp.into_iter().enumerate() {
            let written = entry_of::<McpServerFile>(entry, index, origin)?;
            let name = written.name.clone();
            let invalid = |field: &str, message: String| RegistryError::Invalid {
                origin: origin.to_string(),
                tool: format!("[[mcp]] {name}"),
                field: field.to_string(),
                message,
            };
            let server = config::check(written, env).map_err(|(f, m)| invalid(f, m))?;
            if mcp.iter().any(|other| other.name == server.name) {
                return Err(invalid("name", "registered twice".into()));
            }
            mcp.push(server);
        }
        Ok(ToolsFile { registry, mcp })
    }
}

/// One `[[tools]]` or `[[mcp]]` table, deserialized; a failure names the entry and the field.
fn entry_of<T: serde::de::DeserializeOwned>(
    entry: toml::Value,
    index: usize,
    origin: &str,
) -> Result<T, RegistryError> {
    let tool = entry
        .get("name")
        .and_then(toml::Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("#{}", index + 1));
    T::deserialize(entry).map_err(|error| {
        let message = error.message().to_string();
        RegistryError::Invalid {
            origin: origin.to_string(),
            field: field_in(&message).unwrap_or_else(|| "(entry)".into()),
            tool,
            message,
        }
    })
}

impl ToolRegistry {
    /// Loads a registry file that registers no MCP server (those need [`ToolsFile::load`]).
    pub fn load(path: &Path) -> Result<ToolRegistry, RegistryError> {
        let file = ToolsFile::load(path)?;
        without_mcp(file, &path.display().to_string())
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

    /// Parses registry TOML that registers no MCP server; `origin` names the source in errors.
    pub fn parse_toml(text: &str, origin: &str) -> Result<ToolRegistry, RegistryError> {
        let file = ToolsFile::parse_toml(text, origin, &|var| std::env::var(var).ok())?;
        without_mcp(file, origin)
    }
}

fn without_mcp(file: ToolsFile, origin: &str) -> Result<ToolRegistry, RegistryError> {
    match file.mcp.first() {
        None => Ok(file.registry),
        Some(server) => Err(RegistryError::Invalid {
            origin: origin.to_string(),
            tool: format!("[[mcp]] {}", server.name),
            field: "mcp".into(),
            message: "MCP servers are registered by `cairn serve` only".into(),
        }),
    }
}

/// The field a serde message is about (`missing field `x``, `unknown field `x``).
fn field_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_string())
}
