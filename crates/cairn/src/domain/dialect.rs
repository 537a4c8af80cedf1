//! The JSON Schema dialect cairn reads schemas in: tool argument schemas, model answer schemas
//! and the `schema` acceptance checks of plans all compile here.
//!
//! A schema that names its draft in `$schema` is read in that draft. One that does not is read
//! as Draft 7, the dialect tool and function-calling schemas are written in (OpenAI's, MCP's
//! `inputSchema` in practice), rather than the library's default of Draft 2020-12. Compiling a
//! schema also checks it against its draft's meta-schema, and the validator for that check is
//! built once per process and kept: 2020-12's (its vocabularies and `$dynamicRef`s) measured
//! 7.9 MB of memory, Draft 7's 1.3 MB (`docs/benchmarks.md`, idle RSS). So a process that never
//! meets a 2020-12 schema never pays for one. Where the drafts differ for a schema without
//! `$schema`: `$ref` takes no sibling keywords, and 2020-12-only keywords (`prefixItems`,
//! `dependentRequired`, `unevaluatedProperties`, ...) are not applied; a schema that needs them
//! says `"$schema": "https://json-schema.org/draft/2020-12/schema"`.

use jsonschema::{Draft, Validator};
use serde_json::Value;

/// Compiles `schema` in the draft it names, Draft 7 when it names none, or says why it is not
/// a schema.
pub fn validator(schema: &Value) -> Result<Validator, String> {
    let compiled = if schema.get("$schema").is_some() {
        jsonschema::validator_for(schema)
    } else {
        jsonschema::options()
            .with_draft(Draft::Draft7)
            .build(schema)
    };
    compiled.map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_without_a_draft_is_read_as_draft_7() {
        // Draft 7 ignores prefixItems; 2020-12 applies it.
        let schema = json!({"type": "array", "prefixItems": [{"type": "string"}]});
        let draft7 = validator(&schema).expect("compiles");
        assert!(draft7.is_valid(&json!([1])));
        let mut named = schema.clone();
        named["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        let draft2020 = validator(&named).expect("compiles");
        assert!(!draft2020.is_valid(&json!([1])));
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused() {
        assert!(validator(&json!({"type": "strin"})).is_err());
        assert!(validator(&json!({"properties": 5})).is_err());
        assert!(validator(&json!({"required": "name"})).is_err());
    }
}
