//! Field-level checks of one tool registration (`super::ToolRegistry::from_specs`).

use std::collections::BTreeSet;

use super::{MAX_TIMEOUT_MS, ToolSpec};

/// Longest declared artifact name: what a plan's check may name (`engine::schemas`).
const MAX_ARTIFACT_NAME: usize = 60;

/// Field-level checks; returns the offending field and why.
pub(super) fn check_spec(spec: &ToolSpec) -> Result<(), (&'static str, String)> {
    let name_ok = !spec.name.is_empty()
        && spec.name.len() <= 64
        && spec
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !name_ok {
        return Err((
            "name",
            "must be 1-64 characters of letters, digits, '_', '-' or '.'".into(),
        ));
    }
    if spec.description.trim().is_empty() {
        return Err(("description", "must not be empty".into()));
    }
    check_url(&spec.url).map_err(|message| ("url", message))?;
    if let Some(sandbox) = &spec.sandbox_url {
        check_url(sandbox).map_err(|message| ("sandbox_url", message))?;
    }
    if spec.timeout_ms == 0 || spec.timeout_ms > MAX_TIMEOUT_MS {
        return Err((
            "timeout_ms",
            format!("must be 1..={MAX_TIMEOUT_MS}, got {}", spec.timeout_ms),
        ));
    }
    if !spec.args_schema.is_object() {
        return Err(("args_schema", "must be a JSON Schema object".into()));
    }
    check_artifacts(&spec.artifacts).map_err(|message| ("artifacts", message))
}

/// Declared artifact names: each 1-60 characters, not blank, declared once.
fn check_artifacts(names: &[String]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for name in names {
        if name.trim().is_empty() || name.chars().count() > MAX_ARTIFACT_NAME {
            return Err(format!(
                "each name must be 1-{MAX_ARTIFACT_NAME} characters and not blank, got {name:?}"
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(format!("{name:?} is declared twice"));
        }
    }
    Ok(())
}

/// An `http://` or `https://` URL, or why not.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|error| format!("not a URL ({error})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "must be http:// or https://, got {}://",
            parsed.scheme()
        ));
    }
    Ok(())
}
