//! Injected faults: the HTTP-level ones shared by the model and tool endpoints, and the
//! corruptions that turn a valid plan into an invalid one.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::scenario::{Fault, FaultKind, PlanFlaw};
use crate::llm::headers;

/// How long `hang` waits when the scenario does not say.
pub const DEFAULT_HANG_MS: u64 = 600_000;

/// Answers a transport-level fault, or `None` when the fault changes the content instead
/// (`hang` sleeps here and then lets the normal answer go out).
pub async fn transport(fault: &Fault) -> Option<Response> {
    match fault.kind {
        FaultKind::Http500 => {
            let status = fault
                .status
                .and_then(|s| StatusCode::from_u16(s).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Some(labelled(
                status,
                json!({"error": {"message": "simulated server error", "type": "server_error"}}),
            ))
        }
        FaultKind::Gone => Some(labelled(
            StatusCode::GONE,
            json!({"error": {"message": "simulated: gone", "type": "gone"}}),
        )),
        FaultKind::RateLimit => {
            let seconds = fault.retry_after_s.unwrap_or(1);
            let mut response = labelled(
                StatusCode::TOO_MANY_REQUESTS,
                json!({"error": {"message": "simulated rate limit", "type": "rate_limit"}}),
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            Some(response)
        }
        FaultKind::Hang => {
            tokio::time::sleep(Duration::from_millis(fault.ms.unwrap_or(DEFAULT_HANG_MS))).await;
            None
        }
        FaultKind::MalformedJson | FaultKind::InvalidPlan | FaultKind::TruncatedBody => None,
    }
}

/// A JSON response carrying the simulated label.
pub fn labelled(status: StatusCode, body: Value) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(headers::SIMULATED, HeaderValue::from_static("true"));
    response
}

/// A 200 whose body is cut half-way: the declared length is the full body's, the stream
/// ends early with an error, so the connection is dropped mid-body.
pub fn truncated(body: &Value) -> Response {
    let full = body.to_string().into_bytes();
    let half = full[..full.len() / 2].to_vec();
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![
        Ok(half),
        Err(std::io::Error::other("simulated truncated body")),
    ];
    let mut response = Response::new(Body::from_stream(futures_util::stream::iter(chunks)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(full.len()));
    headers.insert(headers::SIMULATED, HeaderValue::from_static("true"));
    response
}

/// Text that starts like the JSON answer and breaks off: not parseable.
pub fn malformed(text: &str) -> String {
    let cut: String = text.chars().take(text.chars().count() / 2).collect();
    format!("{cut} <<simulated malformed output")
}

/// Corrupts a plan (`{"milestones": [...]}`) with the given flaw.
pub fn corrupt_plan(plan: &Value, flaw: PlanFlaw) -> Value {
    let mut plan = plan.clone();
    let Some(milestones) = plan.get_mut("milestones").and_then(Value::as_array_mut) else {
        return plan;
    };
    if milestones.is_empty() {
        return plan;
    }
    let last = milestones.len() - 1;
    let id_of = |m: &Value| m.get("id").cloned().unwrap_or(Value::Null);
    match flaw {
        PlanFlaw::Cycle => {
            // The first milestone now waits for the last, which (transitively) waits for it.
            let last_id = id_of(&milestones[last]);
            let first_id = id_of(&milestones[0]);
            push_dependency(&mut milestones[0], last_id);
            if last != 0 {
                push_dependency(&mut milestones[last], first_id);
            }
        }
        PlanFlaw::UnknownDependency => {
            push_dependency(&mut milestones[last], json!("m404"));
        }
        PlanFlaw::DuplicateId => {
            let copy = milestones[0].clone();
            milestones.push(copy);
        }
        PlanFlaw::UnknownTool => {
            if let Some(tools) = milestones[0].get_mut("tools").and_then(Value::as_array_mut) {
                tools.push(json!("teleport"));
            } else {
                milestones[0]["tools"] = json!(["teleport"]);
            }
        }
    }
    plan
}

fn push_dependency(milestone: &mut Value, id: Value) {
    match milestone
        .get_mut("depends_on")
        .and_then(Value::as_array_mut)
    {
        Some(list) if !list.contains(&id) => list.push(id),
        Some(_) => {}
        None => milestone["depends_on"] = json!([id]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::generic;

    #[test]
    fn every_flaw_changes_the_plan_as_named() {
        let plan = generic::plan();
        let cycle = corrupt_plan(&plan, PlanFlaw::Cycle);
        assert_eq!(cycle["milestones"][0]["depends_on"], json!(["m2"]));
        let unknown = corrupt_plan(&plan, PlanFlaw::UnknownDependency);
        assert_eq!(
            unknown["milestones"][1]["depends_on"],
            json!(["m1", "m404"])
        );
        let duplicate = corrupt_plan(&plan, PlanFlaw::DuplicateId);
        assert_eq!(duplicate["milestones"][2]["id"], "m1");
        let tool = corrupt_plan(&plan, PlanFlaw::UnknownTool);
        assert_eq!(
            tool["milestones"][0]["tools"],
            json!(["lookup", "teleport"])
        );
        assert!(serde_json::from_str::<Value>(&malformed(&plan.to_string())).is_err());
    }
}
