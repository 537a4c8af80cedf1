//! MCP shapes to cairn's: a listed tool becomes a [`ToolSpec`], a call's result an answer.
//!
//! Hints are hints, so the mapping errs on the safe side: only `readOnlyHint: true` makes a
//! tool read-only; an unannotated tool is taken to write (receipts, at-most-once, the gate
//! plans its goals). The operator's `side_effects` override wins over the hint.

use std::collections::BTreeMap;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{Value, json};

use super::config::McpServerSpec;
use crate::schema::truncate;
use crate::tools::ToolSpec;

/// Longest text kept from one result; the rest is cut and the cut is said.
pub const MAX_TEXT: usize = 64 * 1024;

/// The registry entry for `tool` of `server`, or why it is skipped.
pub fn spec(server: &McpServerSpec, tool: &Tool) -> Result<ToolSpec, String> {
    let name = format!("{}.{}", server.name, tool.name);
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint).unwrap_or(false);
    let side_effects = server
        .side_effects
        .get(tool.name.as_ref())
        .copied()
        .unwrap_or(!read_only);
    let idempotent = hints.and_then(|a| a.idempotent_hint).unwrap_or(read_only);
    let description = tool
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .or(tool.title.as_deref())
        .unwrap_or(tool.name.as_ref());
    // Declared output fields become the tool's artifacts, so a check may name them.
    let artifacts = tool
        .output_schema
        .as_ref()
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default();
    let spec = ToolSpec {
        name,
        description: truncate(description, 2000),
        args_schema: Value::Object((*tool.input_schema).clone()),
        url: server.url.clone(),
        timeout_ms: server.timeout_ms,
        side_effects,
        idempotent,
        sandbox_url: server.sandbox_url.clone(),
        simulated: false,
        artifacts,
    };
    crate::tools::registry::checked(&spec)
        .map_err(|(field, message)| format!("{field}: {message}"))?;
    Ok(spec)
}

/// What a call answered, in the tool contract's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub output: Value,
    pub artifacts: BTreeMap<String, Value>,
    /// `isError`: the tool's own failure, with its text.
    pub error: Option<String>,
}

/// Reads a result: `structuredContent` is the output (its fields the declared artifacts);
/// without it, the text blocks (parsed when they are JSON); binary content is kept as a
/// reference (its type and size), never inlined, so it never reaches a prompt.
pub fn answer(result: CallToolResult, declared: &[String]) -> Answered {
    let texts: Vec<String> = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .collect();
    let others: Vec<Value> = result.content.iter().filter_map(reference).collect();
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        let message = if text.trim().is_empty() {
            "the tool reported an error and said nothing more".to_string()
        } else {
            truncate(&text, 2000)
        };
        return Answered {
            output: Value::Null,
            artifacts: BTreeMap::new(),
            error: Some(message),
        };
    }
    let output = match result.structured_content {
        Some(structured) => structured,
        None => from_text(&text, others),
    };
    let artifacts = match &output {
        Value::Object(fields) => fields
            .iter()
            .filter(|(name, _)| declared.contains(name))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
        _ => BTreeMap::new(),
    };
    Answered {
        output,
        artifacts,
        error: None,
    }
}

/// The output of a result without structured content.
fn from_text(text: &str, others: Vec<Value>) -> Value {
    let kept = if text.len() > MAX_TEXT {
        let mut cut = MAX_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        Value::String(format!(
            "{} [truncated: {} of {} bytes kept]",
            &text[..cut],
            cut,
            text.len()
        ))
    } else {
        serde_json::from_str::<Value>(text)
            .ok()
            .filter(|v| v.is_object() || v.is_array())
            .unwrap_or_else(|| Value::String(text.to_string()))
    };
    if others.is_empty() {
        kept
    } else {
        json!({ "text": kept, "content": others })
    }
}

/// A non-text block as a reference: its kind, type and size, or the link it names.
fn reference(block: &ContentBlock) -> Option<Value> {
    let value = serde_json::to_value(block).ok()?;
    let kind = value.get("type").and_then(Value::as_str)?.to_string();
    if kind == "text" {
        return None;
    }
    let size = value
        .get("data")
        .and_then(Value::as_str)
        .map(|data| data.len() * 3 / 4);
    let mut kept = json!({ "type": kind });
    for field in ["mimeType", "uri", "name"] {
        if let Some(found) = value
            .get(field)
            .or_else(|| value.pointer(&format!("/resource/{field}")))
        {
            kept[field] = found.clone();
        }
    }
    if let Some(size) = size {
        kept["bytes"] = json!(size);
    }
    Some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> McpServerSpec {
        super::super::config::check(
            toml::from_str(
                "name = \"ev\"\nurl = \"http://127.0.0.1:1/mcp\"\nside_effects = { noted = false }\n",
            )
            .expect("toml"),
            &|_| None,
        )
        .expect("valid")
    }

    fn tool(value: Value) -> Tool {
        serde_json::from_value(value).expect("tool")
    }

    #[test]
    fn hints_map_to_side_effects_and_unannotated_tools_write() {
        let read = spec(
            &server(),
            &tool(
                json!({"name": "get-sum", "description": "adds", "inputSchema": {"type": "object"},
                         "annotations": {"readOnlyHint": true}}),
            ),
        )
        .expect("spec");
        assert_eq!(read.name, "ev.get-sum");
        assert!(!read.side_effects && read.idempotent);
        let bare = spec(
            &server(),
            &tool(json!({"name": "write", "inputSchema": {"type": "object"}})),
        )
        .expect("spec");
        assert!(bare.side_effects && !bare.idempotent && bare.description == "write");
        let overridden = spec(
            &server(),
            &tool(json!({"name": "noted", "inputSchema": {"type": "object"}})),
        )
        .expect("spec");
        assert!(!overridden.side_effects);
        let declared = spec(
            &server(),
            &tool(json!({"name": "w", "inputSchema": {"type": "object"},
                         "outputSchema": {"type": "object", "properties": {"temperature": {}}}})),
        )
        .expect("spec");
        assert_eq!(declared.artifacts, vec!["temperature".to_string()]);
    }

    #[test]
    fn results_become_outputs_errors_and_references() {
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "{\"a\": 1}"}],
            "structuredContent": {"temperature": 33, "other": 1}
        }))
        .expect("result");
        let answered = answer(result, &["temperature".to_string()]);
        assert_eq!(answered.output["other"], 1);
        assert_eq!(answered.artifacts["temperature"], 33);
        let error: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "no such city"}], "isError": true
        }))
        .expect("result");
        assert_eq!(answer(error, &[]).error.as_deref(), Some("no such city"));
        let image: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "here"},
                        {"type": "image", "data": "AAAA", "mimeType": "image/png"}]
        }))
        .expect("result");
        let answered = answer(image, &[]);
        assert_eq!(answered.output["text"], "here");
        assert_eq!(answered.output["content"][0]["mimeType"], "image/png");
        assert!(!answered.output.to_string().contains("AAAA"));
        let long: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "x".repeat(MAX_TEXT + 10)}]
        }))
        .expect("result");
        assert!(
            answer(long, &[])
                .output
                .as_str()
                .expect("text")
                .ends_with("bytes kept]")
        );
    }
}
