//! Which argument values of a step list the model that wrote it was shown.
//!
//! A tactical planner writes a milestone's whole step list before any of it runs, so a step
//! that needs what an earlier step of the same list returns can only guess it (the real 1.5B
//! model wrote `cancel_order {"order_id": "ord-1234"}` after a `list_orders` it had not yet
//! seen the answer of). A value the writer was never shown is a guess; the engine runs the
//! steps up to the first such step and asks for the rest with the outputs in view.
//!
//! Only values that name something are judged: strings of at most [`MAX_WORDS`] words (ids,
//! names, paths, addresses). Prose (a note's text, a ticket's body) is composed, not copied, and
//! numbers are as often limits and counts as ids, so neither is judged.

use serde_json::Value;

/// The most words a string may have to be judged as a name rather than prose.
const MAX_WORDS: usize = 3;

/// The longest string judged as a name.
const MAX_CHARS: usize = 80;

/// The values of `args` that name something and that appear nowhere in `shown` (the text the
/// writer was given), compared without regard to case.
pub fn unshown_values(args: &Value, shown: &str) -> Vec<String> {
    let shown = shown.to_lowercase();
    let mut unshown = Vec::new();
    collect(args, &shown, &mut unshown);
    unshown
}

fn collect(value: &Value, shown: &str, unshown: &mut Vec<String>) {
    match value {
        Value::String(text) if names_something(text) => {
            let needle = text.trim().to_lowercase();
            // The writer was shown JSON: a value with a quote or a backslash appears escaped.
            let escaped = serde_json::to_string(&needle).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if !shown.contains(&needle) && !shown.contains(escaped) {
                unshown.push(text.clone());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, shown, unshown)),
        Value::Object(fields) => fields.values().for_each(|v| collect(v, shown, unshown)),
        _ => {}
    }
}

fn names_something(text: &str) -> bool {
    let text = text.trim();
    !text.is_empty()
        && text.chars().count() <= MAX_CHARS
        && text.split_whitespace().count() <= MAX_WORDS
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_id_the_writer_never_saw_is_a_guess() {
        let shown = r#"{"goal": "Find the latest order of customer C-1042 and refund it"}"#;
        let args = json!({"customer": "C-1042", "order_id": "ord-1234"});
        assert_eq!(unshown_values(&args, shown), vec!["ord-1234".to_string()]);
    }

    #[test]
    fn values_in_the_text_shown_are_not_guesses_whatever_their_case() {
        let shown = r#"{"observations": [{"output": {"orders": ["ORD-7M3Q1"]}}]}"#;
        assert!(unshown_values(&json!({"order_id": "ord-7m3q1"}), shown).is_empty());
    }

    #[test]
    fn prose_and_numbers_are_not_judged() {
        let args = json!({"text": "Service A will be restarted tonight.", "limit": 5,
                          "nested": [{"title": "Restart tonight"}]});
        assert_eq!(
            unshown_values(&args, "{}"),
            vec!["Restart tonight".to_string()]
        );
    }

    #[test]
    fn a_value_with_a_quote_is_found_as_it_was_shown_in_json() {
        let shown = serde_json::to_string(&json!({"goal": "rename \"old\" to new"})).unwrap();
        assert!(unshown_values(&json!({"key": "\"old\""}), &shown).is_empty());
    }
}
