//! `GET /v1/tasks/{id}/events`: a task's events as Server-Sent Events, or as a JSON page.
//!
//! The stream must neither lose nor repeat an event, on any replica, across reconnects:
//! 1. subscribe to the store's wake-up hints FIRST, so a commit that lands while we replay still
//!    wakes us afterwards;
//! 2. replay stored rows after `Last-Event-ID` (or `?after=N`);
//! 3. follow: on a wake-up for this task, a lagged receiver (hints were dropped) or a poll tick
//!    (the fallback when hints are lost entirely), re-read rows after the last `seq` sent.
//!
//! Hints are never trusted as data; rows are. Each SSE message carries `id:` = the event's `seq`
//! (so a browser's automatic reconnect resumes exactly), `event:` = its kind, `data:` = the Event
//! JSON. Keep-alive comments flow every `sse_keepalive_ms`. After a terminal event the stream
//! ends; reconnecting past it answers `204 No Content`, which tells `EventSource` to stop.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::domain::event::{Event, kinds};
use crate::http::auth::Principal;
use crate::http::doc_schemas::{EventFrame, EventKindName, StoreFailure};
use crate::http::error::{ApiError, Problem};
use crate::http::extract::{ApiPath, ApiQuery, parse_task_id};
use crate::http::tasks::find_task;
use crate::http::{AppState, ShutdownSignal};
use crate::meters::SubscriberGuard;
use crate::store::{Store, Wakeup};

pub mod filter;
mod page;

use filter::KindFilter;
pub use page::EventPage;
use page::{PageRequest, event_page};

/// Rows read per query while replaying or catching up.
const READ_BATCH: i64 = 500;
/// Page size of the JSON form when `limit` is absent.
pub const DEFAULT_EVENT_PAGE: i64 = 100;

/// Query parameters of the events endpoint.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Start after this `seq` (0 = from the beginning). `Last-Event-ID` wins when both are sent.
    #[param(value_type = Option<i64>, minimum = 0)]
    pub after: Option<String>,
    /// Page size of the JSON form: 1 up to the configured maximum, 100 by default (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// A stream token from `POST /v1/tasks/{id}/stream-token`, for clients that cannot send an
    /// `Authorization` header (`EventSource`). Valid for this task only, for a few minutes.
    pub token: Option<String>,
    /// Only events of these kinds, comma-separated: each an event kind (`step.finished`) or a
    /// family (`ledger`, every `ledger.*`). The terminal event is always delivered.
    #[param(value_type = Option<Vec<EventKindName>>, inline, style = Form, explode = false, min_items = 1)]
    pub kinds: Option<String>,
}

/// Streams (or pages) a task's events.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/events",
    tag = "events",
    params(
        ("id" = uuid::Uuid, Path, description = "The task id."),
        ("Last-Event-ID" = Option<i64>, Header, nullable = false, minimum = 0, description = "Resume after this event `seq` (sent by EventSource on reconnect)."),
        EventsQuery,
    ),
    responses(
        (status = 200, description = "`text/event-stream` (default): `id:` = seq, `event:` = kind, `data:` = the Event JSON; keep-alive comments; ends after the terminal event. With `Accept: application/json`: one page of events.",
         content(
            (EventFrame = "text/event-stream"),
            (EventPage = "application/json"),
         )),
        (status = 204, description = "The task has ended and every event up to its terminal one was already delivered."),
        (status = 400, description = "The id is not a UUID, `Last-Event-ID`/`after` is not a non-negative integer, `limit` is out of range, or `kinds` names no kind or family.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task.", body = Problem, content_type = "application/problem+json"),
        StoreFailure,
    ),
    security(("bearer" = []), ("stream_token" = []))
)]
pub async fn task_events(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<EventsQuery>,
    shutdown: Option<Extension<ShutdownSignal>>,
) -> Result<Response, ApiError> {
    let id = parse_task_id(&id)?;
    let after = start_after(&headers, query.after.as_deref())?;
    let filter = KindFilter::parse(query.kinds.as_deref())?;
    let max = state.settings.max_page_size;
    let limit = query.limit.unwrap_or(DEFAULT_EVENT_PAGE.min(max));
    if !(1..=max).contains(&limit) {
        return Err(ApiError::InvalidParameter(format!(
            "limit must be between 1 and {max}, got {limit}"
        )));
    }
    if wants_json(&headers) {
        let request = PageRequest {
            after,
            limit,
            filter,
        };
        let page = event_page(&state, &principal.tenant, id, request).await?;
        return Ok(Json(page).into_response());
    }
    // Before the first read (see the module docs).
    let wakeups = state.store.subscribe();
    let task = find_task(&state, &principal.tenant, id).await?;
    if task.status.is_terminal() && after >= task.last_seq {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let poll = Duration::from_millis(state.settings.poll_interval_ms);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + poll, poll);
    // A slow reader must not come back to a burst of stale ticks.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let follow = Follow {
        store: state.store.clone(),
        tenant: principal.tenant,
        task_id: id,
        last_seq: after,
        pending: VecDeque::new(),
        wakeups: Some(wakeups),
        tick,
        shutdown: shutdown.map(|Extension(signal)| signal.0),
        done: false,
        filter,
        _subscriber: state.meters.sse_subscriber(),
    };
    let stream = futures_util::stream::unfold(follow, |mut follow| async move {
        let event = follow.next().await?;
        Some((Ok::<_, Infallible>(to_sse(&event)), follow))
    });
    let keep_alive = KeepAlive::new()
        .interval(Duration::from_millis(state.settings.sse_keepalive_ms))
        .text("keep-alive");
    let mut response = Sse::new(stream).keep_alive(keep_alive).into_response();
    // Reverse proxies must not buffer a live stream.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// Where to resume: `Last-Event-ID` first (EventSource sends it on reconnect while the URL still
/// carries the original `after`), then `?after`, else from the beginning. Both are checked when
/// both are sent, so a malformed `after` is never silently ignored.
fn start_after(headers: &HeaderMap, after: Option<&str>) -> Result<i64, ApiError> {
    let after = after.map(|text| parse_seq(text, "after")).transpose()?;
    if let Some(value) = headers.get("last-event-id") {
        let text = value.to_str().map_err(|_| {
            ApiError::InvalidLastEventId("Last-Event-ID must be a non-negative integer".into())
        })?;
        return parse_seq(text, "Last-Event-ID");
    }
    Ok(after.unwrap_or(0))
}

fn parse_seq(text: &str, name: &str) -> Result<i64, ApiError> {
    match text.trim().parse::<i64>() {
        Ok(seq) if seq >= 0 => Ok(seq),
        _ => Err(ApiError::InvalidLastEventId(format!(
            "{name} must be a non-negative integer (the `id` of an event already received), got \
             {text:?}"
        ))),
    }
}

/// JSON when the client asks for it and does not also accept an event stream.
fn wants_json(headers: &HeaderMap) -> bool {
    let types: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| {
            let media = item.split(';').next().unwrap_or_default();
            media.trim().to_ascii_lowercase()
        })
        .collect();
    types.iter().any(|media| media == "application/json")
        && !types.iter().any(|media| media == "text/event-stream")
}

fn to_sse(event: &Event) -> SseEvent {
    // Field values must not contain line breaks (axum panics on them); kinds are `noun.verb`
    // today, but a stray one must not take the stream down.
    let kind: String = event
        .kind
        .chars()
        .filter(|c| !matches!(c, '\r' | '\n' | '\0'))
        .collect();
    // Compact JSON escapes control characters, so the data is a single line.
    let data = serde_json::to_string(event).unwrap_or_else(|error| {
        tracing::error!(%error, task_id = %event.task_id, seq = event.seq, "event not serialisable");
        "{}".to_string()
    });
    SseEvent::default()
        .id(event.seq.to_string())
        .event(kind)
        .data(data)
}

/// The state of one live stream.
struct Follow {
    store: Arc<dyn Store>,
    tenant: String,
    task_id: Uuid,
    /// The `seq` of the last event handed out.
    last_seq: i64,
    pending: VecDeque<Event>,
    /// `None` once the hint channel closed: the poll tick alone drives the stream then.
    wakeups: Option<broadcast::Receiver<Wakeup>>,
    tick: tokio::time::Interval,
    shutdown: Option<watch::Receiver<bool>>,
    /// Set after the terminal event.
    done: bool,
    /// `?kinds=`: events it does not admit are read past, not sent.
    filter: KindFilter,
    /// Counts the stream in `cairn_sse_subscribers` while it is open.
    _subscriber: SubscriberGuard,
}

impl Follow {
    /// The next event, or `None` when the stream should end (terminal event sent, shutdown, or a
    /// store failure; the client reconnects with `Last-Event-ID` and loses nothing).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.last_seq = event.seq;
                if kinds::is_terminal(&event.kind) {
                    self.done = true;
                    self.pending.clear();
                }
                if !self.filter.admits(&event.kind) {
                    continue;
                }
                return Some(event);
            }
            if self.done {
                return None;
            }
            match self
                .store
                .list_events(&self.tenant, self.task_id, self.last_seq, READ_BATCH)
                .await
            {
                Ok(events) if !events.is_empty() => {
                    self.pending.extend(events);
                    continue;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(%error, task_id = %self.task_id, "event stream read failed; closing it");
                    return None;
                }
            }
            if !self.wait().await {
                return None;
            }
        }
    }

    /// Waits until new rows may exist. Returns false when the server is shutting down.
    async fn wait(&mut self) -> bool {
        loop {
            tokio::select! {
                _ = self.tick.tick() => return true,
                _ = shutting_down(self.shutdown.as_mut()) => return false,
                received = recv_hint(self.wakeups.as_mut()) => match received {
                    Ok(Wakeup::Events { task_id, last_seq })
                        if task_id == self.task_id && last_seq > self.last_seq => return true,
                    Ok(_) => {}
                    // Hints were dropped: one of them may have been ours.
                    Err(RecvError::Lagged(_)) => return true,
                    Err(RecvError::Closed) => self.wakeups = None,
                },
            }
        }
    }
}

async fn recv_hint(
    receiver: Option<&mut broadcast::Receiver<Wakeup>>,
) -> Result<Wakeup, RecvError> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when shutdown begins (or its sender is gone, which means the server is stopping).
async fn shutting_down(signal: Option<&mut watch::Receiver<bool>>) {
    match signal {
        Some(signal) => {
            let _ = signal.wait_for(|stopping| *stopping).await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_event_id_wins_and_must_be_a_non_negative_integer() {
        let mut headers = HeaderMap::new();
        assert_eq!(start_after(&headers, None).expect("default"), 0);
        assert_eq!(start_after(&headers, Some("7")).expect("after"), 7);
        headers.insert("last-event-id", HeaderValue::from_static("3"));
        assert_eq!(start_after(&headers, Some("7")).expect("header"), 3);
        assert!(
            start_after(&headers, Some("-7")).is_err(),
            "a bad `after` is not ignored"
        );
        for bad in ["-1", "abc", "", "1.5", "99999999999999999999"] {
            headers.insert("last-event-id", HeaderValue::from_str(bad).expect("value"));
            assert!(start_after(&headers, None).is_err(), "{bad:?}");
            assert!(
                start_after(&HeaderMap::new(), Some(bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn json_only_when_asked_for_without_event_stream() {
        let accept = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_static(value));
            wants_json(&headers)
        };
        assert!(accept("application/json"));
        assert!(accept("application/json; charset=utf-8"));
        assert!(!accept("text/event-stream"));
        assert!(!accept("text/event-stream, application/json"));
        assert!(!accept("*/*"));
        assert!(!wants_json(&HeaderMap::new()));
    }

    #[test]
    fn odd_kinds_do_not_break_the_frame() {
        let event = Event {
            task_id: Uuid::now_v7(),
            seq: 4,
            kind: "bad\nkind".into(),
            data: serde_json::json!({"text": "line one\nline two"}),
            created_at: crate::clock::Clock::now(&crate::clock::SystemClock),
        };
        // Must not panic; the frame name loses its line break.
        let _ = to_sse(&event);
    }
}
