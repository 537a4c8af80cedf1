//! JSON body errors in plain words.
//!
//! axum reads a body with `serde_path_to_error` and words a wrong body as
//! `Failed to deserialize the JSON body into the target type: budget: missing field `tokens` at
//! line 1 column 38`: a parser's position and serde's vocabulary. A client needs the field and
//! what is wrong with it: "`budget.tokens` is required". [`data_error`] rewrites serde's few
//! message shapes into that form and keeps any other message whole behind the field's path.

/// What axum puts before the path and serde's message.
const PREFIX: &str = "Failed to deserialize the JSON body into the target type: ";

/// A JSON data error (wrong type, missing or unknown field, unknown variant) in plain words.
pub fn data_error(text: &str) -> String {
    let text = text.strip_prefix(PREFIX).unwrap_or(text);
    let text = without_position(text);
    let (path, message) = split_path(text);
    reword(path, message)
}

/// Drops serde_json's trailing ` at line L column C`.
fn without_position(text: &str) -> &str {
    let Some(at) = text.rfind(" at line ") else {
        return text;
    };
    let tail = &text[at + " at line ".len()..];
    let mut parts = tail.splitn(3, ' ');
    let line = parts.next().unwrap_or_default();
    let word = parts.next().unwrap_or_default();
    let column = parts.next().unwrap_or_default();
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if digits(line) && word == "column" && digits(column) {
        &text[..at]
    } else {
        text
    }
}

/// Splits `path: message`; the path is `None` at the body's top level (`.`) or when serde named
/// no field.
fn split_path(text: &str) -> (Option<&str>, &str) {
    let Some((path, message)) = text.split_once(": ") else {
        return (None, text);
    };
    let is_path = !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '?' | '-'));
    match (is_path, path) {
        (false, _) => (None, text),
        (true, ".") => (None, message),
        (true, path) => (Some(path), message),
    }
}

/// The field a message is about: `inner` under `path`, either of them optional.
fn field(path: Option<&str>, inner: Option<&str>) -> String {
    match (path, inner) {
        (Some(path), Some(inner)) => format!("`{path}.{inner}`"),
        (Some(path), None) => format!("`{path}`"),
        (None, Some(inner)) => format!("`{inner}`"),
        (None, None) => "the body".to_string(),
    }
}

/// The first `name` between backticks in `text`.
fn quoted(text: &str) -> Option<&str> {
    let start = text.find('`')? + 1;
    let len = text[start..].find('`')?;
    Some(&text[start..start + len])
}

fn reword(path: Option<&str>, message: &str) -> String {
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("{} is required", field(path, quoted(rest)));
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        // The path may or may not already end with the unknown key itself.
        let inner = quoted(rest);
        let ends_with_it = match (path, inner) {
            (Some(path), Some(inner)) => path == inner || path.ends_with(&format!(".{inner}")),
            _ => false,
        };
        let name = match ends_with_it {
            true => field(path, None),
            false => field(path, inner),
        };
        return match rest.split_once(", expected ") {
            Some((_, known)) => format!("{name} is not a known field; the fields are {known}"),
            None if rest.contains("there are no fields") => {
                format!("{name} is not a known field; there are none here")
            }
            None => format!("{name} is not a known field"),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let got = quoted(rest).unwrap_or_default();
        return match rest.split_once(", expected ") {
            Some((_, known)) => format!("{} must be {known}, got `{got}`", field(path, None)),
            None => format!("{} cannot be `{got}`", field(path, None)),
        };
    }
    for kind in ["invalid type: ", "invalid value: ", "invalid length "] {
        if let Some(rest) = message.strip_prefix(kind)
            && let Some((got, expected)) = rest.split_once(", expected ")
        {
            return format!("{} must be {expected}, got {got}", field(path, None));
        }
    }
    match path {
        Some(path) => format!("`{path}`: {message}"),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::data_error;

    fn axum(text: &str) -> String {
        format!("Failed to deserialize the JSON body into the target type: {text}")
    }

    #[test]
    fn a_missing_field_names_its_path() {
        assert_eq!(
            data_error(&axum("missing field `budget` at line 1 column 38")),
            "`budget` is required"
        );
        assert_eq!(
            data_error(&axum("budget: missing field `tokens` at line 1 column 60")),
            "`budget.tokens` is required"
        );
    }

    #[test]
    fn an_unknown_field_lists_the_known_ones() {
        assert_eq!(
            data_error(&axum(
                "goall: unknown field `goall`, expected one of `goal`, `budget` at line 1 column 8"
            )),
            "`goall` is not a known field; the fields are one of `goal`, `budget`"
        );
        assert_eq!(
            data_error(&axum(
                "budget: unknown field `coins`, expected `tokens` at line 1 column 9"
            )),
            "`budget.coins` is not a known field; the fields are `tokens`"
        );
        assert_eq!(
            data_error(&axum(
                "unknown field `x`, expected `percent` at line 1 column 4"
            )),
            "`x` is not a known field; the fields are `percent`"
        );
    }

    #[test]
    fn a_wrong_type_or_value_says_what_was_expected() {
        assert_eq!(
            data_error(&axum(
                "budget.tokens: invalid type: string \"many\", expected a whole number at line 1 column 30"
            )),
            "`budget.tokens` must be a whole number, got string \"many\""
        );
        assert_eq!(
            data_error(&axum(
                "strategy: unknown variant `v9`, expected one of `auto`, `v1` at line 1 column 20"
            )),
            "`strategy` must be one of `auto`, `v1`, got `v9`"
        );
    }

    #[test]
    fn no_parser_position_or_axum_prefix_is_left() {
        for text in [
            "missing field `goal` at line 1 column 2",
            "a: something else entirely at line 3 column 9",
            "invalid type: map, expected a string at line 1 column 1",
        ] {
            let plain = data_error(&axum(text));
            assert!(!plain.contains("at line"), "{plain}");
            assert!(!plain.contains("Failed to deserialize"), "{plain}");
        }
        assert_eq!(
            data_error("invalid type: map, expected a string"),
            "the body must be a string, got map"
        );
    }
}
