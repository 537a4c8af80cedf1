//! Structured output: find the JSON in a model's answer and validate it against a schema.
//!
//! Servers that honour `response_format` return bare JSON. Many do not (older llama.cpp
//! builds, some proxies, chatty models), and answer with prose around a fenced block or an
//! inline object. Rather than fail those, the client extracts the first JSON value that parses
//! and validates it; only an answer with no parseable JSON, or JSON that breaks the schema, is
//! invalid output.

use serde_json::Value;

use crate::schema;

/// The outcome of checking an answer: the value, or the messages saying what is wrong.
pub fn parse_and_validate(text: &str, output_schema: &Value) -> Result<Value, Vec<String>> {
    let value = extract_json(text).ok_or_else(|| {
        vec![format!(
            "the answer contains no JSON value; expected an object matching the schema (answer began: {:?})",
            schema::truncate(text.trim(), 120)
        )]
    })?;
    let validator = schema::compile(output_schema)
        .map_err(|error| vec![format!("the requested output schema is invalid: {error}")])?;
    let messages = schema::messages(&validator, &value);
    if messages.is_empty() {
        Ok(value)
    } else {
        Err(messages)
    }
}

/// The first JSON object or array in `text`: the whole text, a fenced block, or an inline value.
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed)
        && (value.is_object() || value.is_array())
    {
        return Some(value);
    }
    for block in fenced_blocks(trimmed) {
        if let Ok(value) = serde_json::from_str::<Value>(block.trim()) {
            return Some(value);
        }
    }
    // An inline value: try every opening brace or bracket, in order, until one parses.
    for (start, ch) in trimmed.char_indices() {
        if ch != '{' && ch != '[' {
            continue;
        }
        if let Some(end) = balanced_end(&trimmed[start..])
            && let Ok(value) = serde_json::from_str::<Value>(&trimmed[start..start + end])
        {
            return Some(value);
        }
    }
    None
}

/// Contents of ``` fenced blocks, with an optional language tag dropped.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
        let body = &after[body_start..];
        let Some(close) = body.find("```") else { break };
        blocks.push(&body[..close]);
        rest = &body[close + 3..];
    }
    blocks
}

/// The byte length of the balanced `{...}` or `[...]` at the start of `text`, strings respected.
fn balanced_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (index, ch) in text.char_indices() {
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + ch.len_utf8());
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extracts_bare_fenced_and_inline_json() {
        assert_eq!(extract_json(r#" {"a": 1} "#), Some(json!({"a": 1})));
        assert_eq!(
            extract_json("Here you go:\n```json\n{\"a\": [1, 2]}\n```\nDone."),
            Some(json!({"a": [1, 2]}))
        );
        assert_eq!(
            extract_json(
                r#"Sure! {"verdict": "pass", "reason": "a } in a string"} hope that helps"#
            ),
            Some(json!({"verdict": "pass", "reason": "a } in a string"}))
        );
        assert_eq!(
            extract_json("{not json} then {\"b\": true}"),
            Some(json!({"b": true}))
        );
        assert_eq!(extract_json("no json here"), None);
        assert_eq!(extract_json("{\"steps\": [ {\"id\": "), None);
    }

    #[test]
    fn validation_errors_become_messages() {
        let schema = json!({
            "type": "object",
            "required": ["verdict"],
            "properties": {"verdict": {"enum": ["pass", "fail"]}}
        });
        assert_eq!(
            parse_and_validate(r#"{"verdict": "pass"}"#, &schema),
            Ok(json!({"verdict": "pass"}))
        );
        let errors = parse_and_validate(r#"{"verdict": "maybe"}"#, &schema).unwrap_err();
        assert!(errors[0].contains("/verdict"), "{errors:?}");
        let errors = parse_and_validate("I think it passed.", &schema).unwrap_err();
        assert!(errors[0].contains("no JSON"), "{errors:?}");
    }
}
