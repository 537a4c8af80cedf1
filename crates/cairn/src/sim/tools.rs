//! Simulated tool endpoints: `POST /tools/{name}`, answered by the scenario's state rules.
//!
//! A rule answers when its `args` match, every `after` pattern matches an earlier successful
//! call of the same task, and no `unless` pattern does. That is enough to script "`run`
//! returns exit_code 1 until `edit_file` was called with path c/start.sh". Like a naive real
//! tool, the simulator does not deduplicate by `Idempotency-Key`: it counts distinct keys and
//! distinct argument sets, so tests can see whether cairn sent an action twice.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::faults;
use super::scenario::{FaultKind, SimTool, ToolRule, args_match};
use super::state::{SimState, ToolRequest};
use crate::llm::headers;
use crate::schema;
use crate::tools::client;

pub async fn call_tool(
    State(state): State<Arc<SimState>>,
    Path(name): Path<String>,
    request_headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(tool) = state.scenario.tools.iter().find(|t| t.name == name) else {
        return faults::labelled(
            StatusCode::NOT_FOUND,
            json!({"error": format!("no simulated tool named {name:?}")}),
        );
    };
    let key = request_headers
        .get(client::IDEMPOTENCY_KEY)
        .and_then(|v| v.to_str().ok());
    let task = request_headers
        .get(client::TASK)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let args = match checked_args(tool, &body) {
        Ok(args) => args,
        Err((status, body)) => {
            state.record_tool_request(ToolRequest {
                tool: &name,
                task: &task,
                key,
                args: None,
                faulted: false,
            });
            return faults::labelled(status, body);
        }
    };

    let history = state.history(&task);
    let chosen = tool
        .rules
        .iter()
        .enumerate()
        .find(|(_, rule)| rule_holds(rule, &args, &history));
    let fault = chosen.and_then(|(index, rule)| {
        rule.fault.as_ref().filter(|fault| {
            state.take_fault(&format!("tools.{name}.rules[{index}]"), &task, fault.times)
        })
    });
    state.record_tool_request(ToolRequest {
        tool: &name,
        task: &task,
        key,
        args: Some(&args),
        faulted: fault.is_some(),
    });
    let latency = chosen
        .and_then(|(_, rule)| rule.latency_ms)
        .or(tool.latency_ms)
        .unwrap_or(state.scenario.latency_ms);
    if latency > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(latency)).await;
    }
    if let Some(fault) = fault
        && let Some(response) = faults::transport(fault).await
    {
        return response;
    }

    let (answer, failed) = answer(chosen.map(|(_, rule)| rule), &args);
    match fault.map(|f| f.kind) {
        Some(FaultKind::MalformedJson) => return malformed(&answer),
        Some(FaultKind::TruncatedBody) => return faults::truncated(&answer),
        _ => {}
    }
    if !failed {
        state.remember_call(&task, &name, &args);
    }
    faults::labelled(StatusCode::OK, answer)
}

/// The body's `args`, checked against the tool's schema; the refusal (status and body) otherwise.
fn checked_args(tool: &SimTool, body: &[u8]) -> Result<Value, (StatusCode, Value)> {
    let args = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut map)) if map.contains_key("args") => {
            map.remove("args").unwrap_or(Value::Null)
        }
        _ => {
            return Err((
                StatusCode::BAD_REQUEST,
                json!({"error": "expected a JSON body {\"args\": {...}}"}),
            ));
        }
    };
    let problems = match schema::compile(&tool.args_schema) {
        Ok(validator) => schema::messages(&validator, &args),
        Err(error) => vec![error],
    };
    if !problems.is_empty() {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"error": format!("invalid args: {}", problems.join("; "))}),
        ));
    }
    Ok(args)
}

/// The tool's answer (the chosen rule's, rendered with the call's args, or a plain ok), and
/// whether it reports an error.
fn answer(rule: Option<&ToolRule>, args: &Value) -> (Value, bool) {
    let mut answer = Map::new();
    let (output, artifacts, error) = match rule {
        Some(rule) => (
            render(&rule.output, args),
            rule.artifacts
                .as_ref()
                .map(|a| render(&Value::Object(a.clone()), args)),
            rule.error.as_ref().map(|e| render(&json!(e), args)),
        ),
        None => (json!({"ok": true}), None, None),
    };
    answer.insert("output".into(), output);
    if let Some(artifacts) = artifacts {
        answer.insert("artifacts".into(), artifacts);
    }
    let failed = error.is_some();
    if let Some(error) = error {
        answer.insert("error".into(), error);
    }
    answer.insert("simulated".into(), Value::Bool(true));
    (Value::Object(answer), failed)
}

/// The `malformed_json` fault: a broken body labelled as JSON.
fn malformed(answer: &Value) -> Response {
    let mut response = (StatusCode::OK, faults::malformed(&answer.to_string())).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(headers::SIMULATED, HeaderValue::from_static("true"));
    response
}

fn rule_holds(rule: &ToolRule, args: &Value, history: &[(String, Value)]) -> bool {
    let seen = |pattern: &super::scenario::CallPattern| {
        history
            .iter()
            .any(|(tool, args)| *tool == pattern.tool && args_match(pattern.args.as_ref(), args))
    };
    args_match(rule.args.as_ref(), args)
        && rule.after.iter().all(seen)
        && !rule.unless.iter().any(seen)
}

/// Fills `{{args.NAME}}` placeholders: a string that is only a placeholder becomes the
/// argument's value; inside longer text the value is written out (strings without quotes).
pub fn render(template: &Value, args: &Value) -> Value {
    match template {
        Value::String(text) => {
            if let Some(name) = text
                .strip_prefix("{{args.")
                .and_then(|rest| rest.strip_suffix("}}"))
                .filter(|name| !name.contains('}'))
            {
                return args.get(name).cloned().unwrap_or(Value::Null);
            }
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some(start) = rest.find("{{args.") {
                out.push_str(&rest[..start]);
                let after = &rest[start + 7..];
                let Some(end) = after.find("}}") else {
                    out.push_str(&rest[start..]);
                    rest = "";
                    break;
                };
                match args.get(&after[..end]) {
                    Some(Value::String(value)) => out.push_str(value),
                    Some(value) => out.push_str(&value.to_string()),
                    None => {}
                }
                rest = &after[end + 2..];
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| render(v, args)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), render(v, args)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled() {
        let args = json!({"path": "c/start.sh", "n": 3});
        assert_eq!(render(&json!("{{args.path}}"), &args), json!("c/start.sh"));
        assert_eq!(render(&json!("{{args.n}}"), &args), json!(3));
        assert_eq!(
            render(
                &json!({"msg": ["patched {{args.path}} x{{args.n}}"]}),
                &args
            ),
            json!({"msg": ["patched c/start.sh x3"]})
        );
        assert_eq!(render(&json!("{{args.missing}}"), &args), Value::Null);
        assert_eq!(render(&json!("open {{args."), &args), json!("open {{args."));
    }
}
