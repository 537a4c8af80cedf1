//! Following a task's events over SSE until its terminal event. A dropped connection or a
//! restarted server is met by reconnecting with `Last-Event-ID` set to the last event shown,
//! so nothing is shown twice or missed, for as long as the server stays away no longer than
//! the allowed time.

use std::time::Duration;

use cairn::domain::event::kinds;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::Value;

use super::api::{Api, ClientError, Opened, WireEvent};
use super::render::{milestones_of, text, units_of};
use super::view::View;

/// The first pause before reconnecting, and the longest one.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// Follows task `id` to its end and answers its final status (`succeeded`, `failed`,
/// `budget_exhausted`, `cancelled`).
pub async fn follow(
    api: &Api,
    id: &str,
    reconnect: Duration,
    view: &mut View,
) -> Result<String, ClientError> {
    let mut last_seq: i64 = 0;
    let mut away_since: Option<tokio::time::Instant> = None;
    let mut pause = FIRST_PAUSE;
    loop {
        let before = last_seq;
        let error = match read_stream(api, id, &mut last_seq, view).await {
            Ok(Some(status)) => return Ok(finish(api, id, status, view).await),
            Ok(None) => ClientError::StreamEnded,
            Err(error) if error.is_transient() => error,
            Err(error) => return Err(error),
        };
        // Events came through: the server was there, so the outage clock starts again.
        if last_seq > before {
            away_since = None;
            pause = FIRST_PAUSE;
        }
        let since = match away_since {
            Some(since) => since,
            None => {
                view.notice(&format!(
                    "{error}; reconnecting to {} after event {last_seq}",
                    api.base()
                ));
                let now = tokio::time::Instant::now();
                away_since = Some(now);
                now
            }
        };
        if since.elapsed() >= reconnect {
            return Err(ClientError::GaveUp {
                seconds: reconnect.as_secs(),
                last: Box::new(error),
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// Reads one connection's events after `last_seq`. `Some(status)` once the task has ended,
/// `None` when the stream closed before that.
async fn read_stream(
    api: &Api,
    id: &str,
    last_seq: &mut i64,
    view: &mut View,
) -> Result<Option<String>, ClientError> {
    let response = match api.open_events(id, *last_seq).await? {
        Opened::Events(response) => response,
        // Ended and every event already delivered: the task row says how.
        Opened::Ended => {
            let task = api.task(id).await?;
            return Ok(Some(text(&task, "status")));
        }
    };
    let mut frames = Box::pin(response.bytes_stream().eventsource());
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|source| ClientError::Stream { source })?;
        let raw: Value = serde_json::from_str(&frame.data).map_err(|source| bad(api, source))?;
        let event: WireEvent =
            serde_json::from_value(raw.clone()).map_err(|source| bad(api, source))?;
        // A replay after a reconnect starts after `last_seq`; this guards a server that
        // repeats itself anyway.
        if event.seq <= *last_seq {
            continue;
        }
        *last_seq = event.seq;
        view.event(&event, &raw);
        if view.wants_details() {
            details(api, id, &event, view).await;
        }
        if kinds::is_terminal(&event.kind) {
            let status = event.kind.strip_prefix("task.").unwrap_or(&event.kind);
            return Ok(Some(status.to_string()));
        }
    }
    Ok(None)
}

fn bad(api: &Api, source: serde_json::Error) -> ClientError {
    ClientError::BadAnswer {
        url: api.base().to_string(),
        source,
    }
}

/// The plan when one is accepted, the ledger when a milestone or the task ends. A failed
/// read costs only the detail: the events go on.
async fn details(api: &Api, id: &str, event: &WireEvent, view: &mut View) {
    if event.kind == kinds::PLAN_ACCEPTED {
        let Some(version) = event.data.get("version").and_then(Value::as_i64) else {
            return;
        };
        match api.plan(id, version).await {
            Ok(plan) => view.plan(milestones_of(&plan)),
            Err(error) => view.notice(&format!("the plan could not be read: {error}")),
        }
        return;
    }
    let milestone_ended = event.kind == kinds::MONITOR_DECIDED
        && event.data.get("decision").and_then(Value::as_str) != Some("failing");
    if milestone_ended || kinds::is_terminal(&event.kind) {
        match api.ledger(id).await {
            Ok(ledger) => view.ledger(&units_of(&ledger)),
            Err(error) => view.notice(&format!("the ledger could not be read: {error}")),
        }
    }
}

/// Shows the result (read from the task, which holds the report) and answers the status.
async fn finish(api: &Api, id: &str, status: String, view: &mut View) -> String {
    let task = api.task(id).await.ok();
    let status = task
        .as_ref()
        .and_then(|t| t.get("status"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or(status);
    view.finish(&status, task.as_ref());
    status
}

/// Prints the events stored so far (`tasks events ID` without `--follow`), page by page.
pub async fn replay(api: &Api, id: &str, view: &mut View) -> Result<(), ClientError> {
    let mut after: i64 = 0;
    loop {
        let page = api.events_page(id, after).await?;
        let items = page
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for raw in &items {
            let event: WireEvent =
                serde_json::from_value(raw.clone()).map_err(|source| bad(api, source))?;
            after = after.max(event.seq);
            view.event(&event, raw);
        }
        let terminal = page.get("terminal").and_then(Value::as_bool) == Some(true);
        let next = page
            .get("next_after")
            .and_then(Value::as_i64)
            .unwrap_or(after);
        if terminal || items.is_empty() {
            return Ok(());
        }
        after = after.max(next);
    }
}
