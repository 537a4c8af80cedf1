//! The simulated chat endpoint: `POST /v1/chat/completions`, answered from the scenario.
//!
//! Matching: among replies of the request's purpose whose `milestone` and `attempt` (when set)
//! equal the request's `X-Cairn-Milestone` and `X-Cairn-Attempt`, the most specific wins
//! (milestone and attempt > milestone > attempt > purpose only), the first in the file on a
//! tie. No match: the generic mode answers (or 404 when the scenario turns it off).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::faults;
use super::generic;
use super::scenario::{Fault, FaultKind, Reply};
use super::state::{LlmRequestRecord, SimState};
use crate::clock::{Clock, SystemClock};
use crate::llm::{Purpose, headers};

fn header<'a>(map: &'a HeaderMap, name: &str) -> Option<&'a str> {
    map.get(name).and_then(|value| value.to_str().ok())
}

/// The best reply for a request, with its index.
pub fn best_reply<'a>(
    replies: &'a [Reply],
    purpose: Purpose,
    milestone: Option<&str>,
    attempt: u32,
    input: &str,
) -> Option<(usize, &'a Reply)> {
    let mut best: Option<(u8, usize, &Reply)> = None;
    for (index, reply) in replies.iter().enumerate() {
        if reply.purpose != purpose {
            continue;
        }
        if reply
            .milestone
            .as_deref()
            .is_some_and(|m| Some(m) != milestone)
        {
            continue;
        }
        if reply.attempt.is_some_and(|a| a != attempt) {
            continue;
        }
        if reply
            .input_contains
            .as_deref()
            .is_some_and(|text| !input.contains(text))
        {
            continue;
        }
        let score = 4 * u8::from(reply.input_contains.is_some())
            + 2 * u8::from(reply.milestone.is_some())
            + u8::from(reply.attempt.is_some());
        if best.is_none_or(|(best_score, _, _)| score > best_score) {
            best = Some((score, index, reply));
        }
    }
    best.map(|(_, index, reply)| (index, reply))
}

/// What the request's `X-Cairn-*` headers say.
struct RequestHeaders<'a> {
    purpose_text: Option<&'a str>,
    purpose: Option<Purpose>,
    task: String,
    milestone: Option<String>,
    attempt_header: Option<u32>,
    attempt: u32,
}

impl<'a> RequestHeaders<'a> {
    fn read(map: &'a HeaderMap) -> RequestHeaders<'a> {
        let purpose_text = header(map, headers::PURPOSE);
        let attempt_header = header(map, headers::ATTEMPT).and_then(|a| a.parse().ok());
        RequestHeaders {
            purpose_text,
            purpose: purpose_text.and_then(Purpose::parse),
            task: header(map, headers::TASK).unwrap_or_default().to_string(),
            milestone: header(map, headers::MILESTONE).map(str::to_string),
            attempt_header,
            attempt: attempt_header.unwrap_or(1),
        }
    }

    /// The record of this request, before it is known what answered it.
    fn record(&self, map: &HeaderMap, request: &Value) -> LlmRequestRecord {
        LlmRequestRecord {
            purpose: self.purpose_text.map(str::to_string),
            task: (!self.task.is_empty()).then(|| self.task.clone()),
            milestone: self.milestone.clone(),
            attempt: self.attempt_header,
            authorized: header(map, "authorization")
                .is_some_and(|value| value.starts_with("Bearer ")),
            response_format: request.get("response_format").is_some(),
            answered_with: "generic".into(),
            traceparent: header(map, "traceparent").map(str::to_string),
        }
    }
}

pub async fn chat(
    State(state): State<Arc<SimState>>,
    request_headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(error) => return bad_request(&format!("the body is not JSON: {error}")),
    };
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return bad_request("`messages` must be an array");
    };
    let asked = RequestHeaders::read(&request_headers);
    let mut record = asked.record(&request_headers, &request);
    let scenario = &state.scenario;
    let input = messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    let chosen = asked.purpose.and_then(|p| {
        best_reply(
            &scenario.replies,
            p,
            asked.milestone.as_deref(),
            asked.attempt,
            &input,
        )
    });
    if let Some((index, _)) = chosen {
        record.answered_with = format!("replies[{index}]");
    } else if !scenario.generic_fallback {
        record.answered_with = "none".into();
        state.record_llm(record, false);
        return faults::labelled(
            StatusCode::NOT_FOUND,
            json!({"error": {"message": "the scenario scripts no reply for this request", "type": "not_found"}}),
        );
    }
    let fault = chosen.and_then(|(index, reply)| {
        reply.fault.as_ref().filter(|fault| {
            state.take_fault(&format!("replies[{index}]"), &asked.task, fault.times)
        })
    });
    if let Some(fault) = fault {
        record
            .answered_with
            .push_str(&format!("+fault:{:?}", fault.kind).to_lowercase());
    }
    state.record_llm(record, fault.is_some());
    let latency = chosen
        .and_then(|(_, reply)| reply.latency_ms)
        .unwrap_or(scenario.latency_ms);
    if latency > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(latency)).await;
    }
    if let Some(fault) = fault
        && let Some(response) = faults::transport(fault).await
    {
        return response;
    }
    let reply = chosen.map(|(_, reply)| reply);
    let content = content(reply, &asked, &request, fault);
    let usage = usage(reply, messages, &content);
    let answer = completion(&state, content, usage);
    if fault.is_some_and(|f| f.kind == FaultKind::TruncatedBody) {
        return faults::truncated(&answer);
    }
    state.add_tokens(usage.map(|(p, c)| p + c).unwrap_or(0));
    faults::labelled(StatusCode::OK, answer)
}

/// The message content: the scripted reply, else the generic mode's, then a content fault.
fn content(
    reply: Option<&Reply>,
    asked: &RequestHeaders<'_>,
    request: &Value,
    fault: Option<&Fault>,
) -> String {
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let goal = generic::goal_of(messages);
    let offered = generic::offered_tools(request);
    let mut content = match (
        reply.and_then(|r| r.json.as_ref()),
        reply.and_then(|r| r.content.as_ref()),
    ) {
        (Some(json), _) => json.to_string(),
        (None, Some(text)) => text.clone(),
        (None, None) => match asked.purpose {
            Some(purpose) => generic::reply(&generic::Asked {
                purpose,
                milestone: asked.milestone.as_deref(),
                attempt: asked.attempt,
                goal: &goal,
                offered: &offered,
            })
            .to_string(),
            None => format!("cairn-sim: a simulated reply about: {goal}"),
        },
    };
    match fault.map(|f| (f.kind, f.flaw)) {
        Some((FaultKind::InvalidPlan, Some(flaw))) => {
            let plan = serde_json::from_str(&content).unwrap_or_else(|_| generic::plan());
            content = faults::corrupt_plan(&plan, flaw).to_string();
        }
        Some((FaultKind::MalformedJson, _)) => content = faults::malformed(&content),
        _ => {}
    }
    content
}

/// (prompt, completion) tokens: the scripted usage, or an estimate in the generic mode.
fn usage(reply: Option<&Reply>, messages: &[Value], content: &str) -> Option<(u64, u64)> {
    match reply {
        Some(reply) => reply.usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
        // The generic mode reports an estimate, as a real model would report something.
        None => {
            let prompt: usize = messages
                .iter()
                .filter_map(|m| m.get("content").and_then(Value::as_str))
                .map(str::len)
                .sum();
            Some((prompt.div_ceil(4) as u64, content.len().div_ceil(4) as u64))
        }
    }
}

/// The OpenAI-shaped `chat.completion` body.
fn completion(state: &SimState, content: String, usage: Option<(u64, u64)>) -> Value {
    let mut answer = json!({
        "id": format!("simcmpl-{}", state.next_id()),
        "object": "chat.completion",
        "created": SystemClock.now().timestamp(),
        "model": state.scenario.model,
        "system_fingerprint": super::scenario::SIM_MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "simulated": true
    });
    if let Some((prompt, completion)) = usage {
        answer["usage"] = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion
        });
    }
    answer
}

fn bad_request(message: &str) -> Response {
    faults::labelled(
        StatusCode::BAD_REQUEST,
        json!({"error": {"message": message, "type": "invalid_request_error"}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(purpose: Purpose, milestone: Option<&str>, attempt: Option<u32>) -> Reply {
        Reply {
            purpose,
            milestone: milestone.map(str::to_string),
            attempt,
            input_contains: None,
            json: None,
            content: None,
            usage: None,
            latency_ms: None,
            fault: None,
            note: None,
        }
    }

    #[test]
    fn the_most_specific_reply_wins_then_the_first() {
        let replies = vec![
            reply(Purpose::Tactical, None, None),
            reply(Purpose::Tactical, Some("m4"), None),
            reply(Purpose::Tactical, Some("m4"), Some(2)),
            reply(Purpose::Tactical, Some("m4"), Some(2)),
            reply(Purpose::Gate, None, None),
        ];
        let pick =
            |m: Option<&str>, a| best_reply(&replies, Purpose::Tactical, m, a, "").map(|r| r.0);
        assert_eq!(pick(Some("m4"), 2), Some(2));
        assert_eq!(pick(Some("m4"), 1), Some(1));
        assert_eq!(pick(Some("m2"), 1), Some(0));
        let mut shown = reply(Purpose::Tactical, None, None);
        shown.input_contains = Some("Priya Raman".into());
        let replies = [reply(Purpose::Tactical, Some("m2"), None), shown];
        let answer = |input| best_reply(&replies, Purpose::Tactical, Some("m2"), 1, input);
        assert_eq!(answer("the owner is Priya Raman").map(|r| r.0), Some(1));
        assert_eq!(answer("the owner is unknown").map(|r| r.0), Some(0));
        assert_eq!(pick(None, 1), Some(0));
        assert_eq!(best_reply(&replies, Purpose::Verifier, None, 1, ""), None);
    }
}
