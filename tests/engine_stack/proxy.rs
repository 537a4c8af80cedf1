//! A proxy in front of the simulator's model endpoint that rewrites the usage each answer
//! reports, the way a real provider could answer (the money tests' providers).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::Via;

/// What the proxy makes of the provider's answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Provider {
    /// Every answer reports exactly its `max_tokens` written.
    AtLimit,
    /// A question's first answer is cut off at `max_tokens`: invalid JSON, `finish_reason:
    /// length`; asked again, it answers (at that budget's limit too).
    CutOffFirst,
    /// Reports eight times the `max_tokens` it was asked for, and a prompt token per byte of
    /// the messages' text. With a 60,000 cap, the engine's books would end at 61,557 had it not
    /// learned from the gate's answer to scale every later reservation (measured by disabling
    /// `Overreport::learn`).
    OverReports,
    /// Reports no usage at all (as some local servers do): cairn must estimate every call.
    NoUsage,
}

/// The usage the proxy returned, per task (prompt, completion).
#[derive(Default)]
pub struct Returned {
    pub by_task: BTreeMap<String, Vec<(u64, u64)>>,
    pub seen: std::collections::BTreeSet<String>,
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    provider: Provider,
    returned: Arc<Mutex<Returned>>,
    http: reqwest::Client,
}

async fn complete(
    State(proxy): State<Proxy>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let max_tokens = body["max_tokens"].as_u64().unwrap_or(1024);
    let prompt_bytes: usize = body["messages"]
        .as_array()
        .map(|m| m.iter().map(|m| m.to_string().len()).sum())
        .unwrap_or(0);
    // A realistic tokenizer: about three bytes a token; the over-reporting one counts a token
    // per byte of the messages' text, the most a byte-level tokenizer could.
    let text_bytes: usize = body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["content"].as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    let prompt = match proxy.provider {
        Provider::OverReports => text_bytes as u64,
        _ => (prompt_bytes as u64).div_ceil(3),
    };
    let task = headers
        .get("x-cairn-task")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let question = format!("{}|{}", body["messages"], task);
    let first = proxy.returned.lock().unwrap().seen.insert(question);
    let (mut answer, completion) = if proxy.provider == Provider::CutOffFirst && first {
        let cut = json!({
            "id": "cut", "object": "chat.completion", "model": "sim",
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": "{\"milestones\": [{\"id"}}]
        });
        (cut, max_tokens)
    } else {
        let mut upstream = proxy
            .http
            .post(format!("{}/v1/chat/completions", proxy.upstream));
        for (name, value) in headers.iter() {
            if name.as_str().starts_with("x-cairn-") {
                upstream = upstream.header(name, value);
            }
        }
        let answer: Value = upstream
            .json(&body)
            .send()
            .await
            .expect("simulator")
            .json()
            .await
            .expect("simulator json");
        let completion = match proxy.provider {
            Provider::OverReports => 8 * max_tokens,
            _ => max_tokens,
        };
        (answer, completion)
    };
    let mut returned = proxy.returned.lock().unwrap();
    let calls = returned.by_task.entry(task).or_default();
    if proxy.provider == Provider::NoUsage {
        // Counted as a call that reported nothing.
        calls.push((0, 0));
        let _ = answer.as_object_mut().map(|fields| fields.remove("usage"));
        return Json(answer);
    }
    answer["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion});
    calls.push((prompt, completion));
    Json(answer)
}

pub fn via(provider: Provider, returned: Arc<Mutex<Returned>>) -> Via {
    Box::new(move |upstream: String| {
        Box::pin(async move {
            let proxy = Proxy {
                upstream,
                provider,
                returned,
                http: reqwest::Client::new(),
            };
            let app = Router::new()
                .route("/v1/chat/completions", post(complete))
                .with_state(proxy);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let base = format!("http://{}", listener.local_addr().expect("addr"));
            tokio::spawn(async move { axum::serve(listener, app).await });
            base
        })
    })
}
