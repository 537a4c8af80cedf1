//! JSON Schema helpers shared by tool arguments and model outputs (a neutral port-floor module:
//! both `tools` and `llm` use it, neither owns it).
//!
//! Both places need the same thing: compile a schema once, and turn a failed validation into a
//! short, bounded list of messages that name where in the instance the problem is, because those
//! messages are sent back to a planner or shown to an operator.

use jsonschema::Validator;
use serde_json::Value;

/// At most this many messages are kept from one validation; the rest are summarised.
pub const MAX_MESSAGES: usize = 8;

/// Compiles a schema (in cairn's dialect, [`crate::domain::dialect`]), or says why it is not one.
pub fn compile(schema: &Value) -> Result<Validator, String> {
    crate::domain::dialect::validator(schema)
}

/// The validation errors of `instance`, each prefixed with its JSON pointer, bounded.
pub fn messages(validator: &Validator, instance: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut extra = 0usize;
    for error in validator.iter_errors(instance) {
        if out.len() < MAX_MESSAGES {
            let path = error.instance_path.to_string();
            let at = if path.is_empty() { "/" } else { path.as_str() };
            out.push(format!("at {at}: {}", truncate(&error.to_string(), 300)));
        } else {
            extra += 1;
        }
    }
    if extra > 0 {
        out.push(format!("... and {extra} more"));
    }
    out
}

/// Cuts text to at most `max` characters (on a char boundary), marking the cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_name_the_path_and_are_bounded() {
        let validator = compile(&json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }))
        .expect("schema");
        assert!(messages(&validator, &json!({"path": "a"})).is_empty());
        let found = messages(&validator, &json!({"path": 3}));
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("/path"), "{found:?}");

        let many = compile(&json!({"type": "array", "items": {"type": "string"}})).expect("schema");
        let found = messages(&many, &json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
        assert_eq!(found.len(), MAX_MESSAGES + 1);
        assert!(found[MAX_MESSAGES].contains("2 more"));
    }

    #[test]
    fn bad_schema_is_refused() {
        assert!(compile(&json!({"type": "no-such-type"})).is_err());
    }
}
