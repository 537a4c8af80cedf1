//! A verifier's verdict, read.

use serde_json::Value;

/// Reads `{"verdict": "pass"|"fail", "reason": "..."}` as (passed, reason).
/// A verdict may list the goal's `requirements`, each `{need, met, evidence}`; a requirement it
/// marks unmet makes the verdict a fail whatever `verdict` says (a list can only make a verdict
/// stricter, never turn a fail into a pass).
pub fn parse_verdict(output: &Value) -> Result<(bool, String), String> {
    let reason = output
        .get("reason")
        .and_then(Value::as_str)
        .map(crate::domain::plan::error::short)
        .unwrap_or_default();
    let unmet = output
        .get("requirements")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r.get("met").and_then(Value::as_bool) == Some(false));
    if let Some(unmet) = unmet {
        let need = unmet
            .get("need")
            .and_then(Value::as_str)
            .unwrap_or("a requirement");
        return Ok((
            false,
            crate::domain::plan::error::short(&format!("not met: {need}")),
        ));
    }
    match output.get("verdict").and_then(Value::as_str) {
        Some("pass") => Ok((true, reason)),
        Some("fail") => Ok((false, reason)),
        _ => Err("verifier output has no \"verdict\" of \"pass\" or \"fail\"".into()),
    }
}
