//! The executor contract, checked before any call: a tool the milestone allows, a registered
//! tool, arguments valid against its JSON Schema, and, for a tool with side effects, no
//! argument that is still a placeholder (`"<owner of A>"`, `"{{owner}}"`, `"${OWNER}"`,
//! `"TODO"`): a small model that could not resolve a value writes the template instead, and a
//! note sent to `"<owner>"` is a side effect that cannot be taken back. A step that breaks the
//! contract is refused and recorded as executor drift.

use serde_json::Value;

use crate::domain::plan::Step;
use crate::engine::runtime::attempt::Attempt;

/// Refuses a step outside the executor contract; `Err` is the drift reason.
pub fn check_contract(cx: &Attempt, allowed: &[String], step: &Step) -> Result<(), String> {
    if !allowed.contains(&step.tool) {
        return Err(format!(
            "tool {:?} is not allowed for this milestone (allowed: {})",
            step.tool,
            allowed.join(", ")
        ));
    }
    let Some(spec) = cx.specs.get(&step.tool) else {
        return Err(format!("tool {:?} is not registered", step.tool));
    };
    if spec.side_effects
        && let Some((path, value)) = placeholder(&step.args, String::new())
    {
        return Err(format!(
            "argument {path} of side-effecting {:?} is an unresolved placeholder: {value:?}",
            step.tool
        ));
    }
    if spec.schema.is_null() {
        return Ok(());
    }
    let validator = cx
        .validators
        .get(spec)
        .map_err(|error| format!("tool {:?} has an unusable schema: {error}", step.tool))?;
    let problems: Vec<String> = validator
        .iter_errors(&step.args)
        .take(3)
        .map(|error| format!("at {:?}: {error}", error.instance_path.to_string()))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "args do not match the schema of {:?}: {}",
            step.tool,
            problems.join("; ")
        ))
    }
}

/// The first string in `args` that is a template rather than a value, with its JSON path.
fn placeholder(args: &Value, path: String) -> Option<(String, String)> {
    match args {
        Value::String(text) if is_placeholder(text) => Some((path, text.clone())),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| placeholder(item, format!("{path}/{i}"))),
        Value::Object(fields) => fields
            .iter()
            .find_map(|(key, item)| placeholder(item, format!("{path}/{key}"))),
        _ => None,
    }
}

fn is_placeholder(text: &str) -> bool {
    let text = text.trim();
    let bracketed = text.len() > 2 && text.starts_with('<') && text.ends_with('>');
    let templated = (text.contains("{{") && text.contains("}}")) || text.contains("${");
    let filler = ["todo", "tbd", "placeholder", "...", "…"]
        .iter()
        .any(|word| text.eq_ignore_ascii_case(word));
    bracketed || templated || filler
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_are_placeholders_and_values_are_not() {
        for text in [
            "<owner of service A>",
            "{{owner}}",
            "Hi ${OWNER}",
            "TODO",
            " ... ",
        ] {
            assert!(is_placeholder(text), "{text}");
        }
        for text in [
            "Priya Raman",
            "a < b and c > d",
            "<",
            "x{y}",
            "restart tonight",
        ] {
            assert!(!is_placeholder(text), "{text}");
        }
        let args = json!({"to": "Priya", "cc": ["ok", "<manager>"]});
        assert_eq!(
            placeholder(&args, String::new()),
            Some(("/cc/1".into(), "<manager>".into()))
        );
        assert_eq!(placeholder(&json!({"to": "Priya"}), String::new()), None);
    }
}
