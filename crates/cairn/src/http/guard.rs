//! The per-request limits of [`super::limits::HttpLimits`], in two layers.
//!
//! [`limit`], the router's outermost layer: the head's size (414, 431), the body's deadline
//! (408) and the request's time limit (503). [`per_client`], on the routes inside
//! authentication: the client's request rate (429 with `Retry-After`) and, for a response that
//! is a live event stream, the client's cap on streams (429). Every answer is a problem
//! ([`Rejection`]).
//!
//! "Client" is what [`client_key`] says: the API key's id once authentication has resolved
//! one, so the limits hold per key wherever its requests come from; the peer's IP address in
//! dev mode (every request is the same dev principal there).
//!
//! A request refused before its handler ran has its small body read first, so a keep-alive
//! client can send its next request on the same connection.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http_body::{Frame, SizeHint};

use super::auth::{DEV_KEY_ID, Principal};
use super::limits::{HttpLimits, Rejection, check_head};

/// Who a limit counts against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// An API key, by its id.
    Key(String),
    /// The peer's address (dev mode: no API keys).
    Peer(IpAddr),
    /// No peer address is known (the router was called without [`super::serve`]).
    Unknown,
}

/// The client a request counts against: the authenticated key, else the peer's address.
pub fn client_key(request: &Request) -> ClientKey {
    if let Some(principal) = request.extensions().get::<Principal>()
        && principal.key_id != DEV_KEY_ID
    {
        return ClientKey::Key(principal.key_id.clone());
    }
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(ClientKey::Unknown, |ConnectInfo(peer)| {
            ClientKey::Peer(peer.ip())
        })
}

/// Paths a load balancer probes; never rate limited.
const UNLIMITED_PATHS: [&str; 2] = ["/healthz", "/readyz"];
/// The keyed limiter forgets clients whose bucket is full again after this many checks.
const FORGET_EVERY: u64 = 4_096;

/// The limiters of one router, shared by every request.
pub struct Guard {
    limits: HttpLimits,
    rate: Option<DefaultKeyedRateLimiter<ClientKey>>,
    checks: AtomicU64,
    streams: Arc<Mutex<HashMap<ClientKey, usize>>>,
}

impl Guard {
    pub fn new(limits: HttpLimits) -> Arc<Guard> {
        let rate = NonZeroU32::new(limits.rate_per_s).map(|per_s| {
            let burst = NonZeroU32::new(limits.rate_burst.max(limits.rate_per_s)).unwrap_or(per_s);
            RateLimiter::keyed(Quota::per_second(per_s).allow_burst(burst))
        });
        Arc::new(Guard {
            limits,
            rate,
            checks: AtomicU64::new(0),
            streams: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// Takes one token from the client's bucket, or says how long until one is there.
    fn admit(&self, client: &ClientKey) -> Result<(), Rejection> {
        let Some(rate) = &self.rate else {
            return Ok(());
        };
        if self.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1 {
            // Memory returns: clients whose buckets are full again are forgotten.
            rate.retain_recent();
            rate.shrink_to_fit();
        }
        rate.check_key(client).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            Rejection::RateLimited {
                per_s: self.limits.rate_per_s,
                burst: self.limits.rate_burst,
                retry_after_s: retry_after_secs(wait),
            }
        })
    }

    /// A slot for one more live stream of `client`, released when the slot is dropped.
    fn open_stream(&self, client: ClientKey) -> Result<Option<StreamSlot>, Rejection> {
        let max = self.limits.sse_per_client;
        if max == 0 {
            return Ok(None);
        }
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let held = streams.entry(client.clone()).or_insert(0);
        if *held >= max {
            return Err(Rejection::TooManyStreams { max });
        }
        *held += 1;
        Ok(Some(StreamSlot {
            client,
            streams: self.streams.clone(),
        }))
    }

    /// Live streams held now, over all clients.
    pub fn streams_held(&self) -> usize {
        let streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.values().sum()
    }
}

/// One client's live stream; dropping it (the stream ended or the client left) frees the slot.
struct StreamSlot {
    client: ClientKey,
    streams: Arc<Mutex<HashMap<ClientKey, usize>>>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = streams.get_mut(&self.client) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                streams.remove(&self.client);
            }
        }
    }
}

/// The outermost middleware: head size, body deadline, request time limit (module docs).
pub async fn limit(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    if let Err(rejection) = check_head(&guard.limits, &request) {
        return refuse(request, rejection).await;
    }
    let body_timeout = guard.limits.body_timeout();
    let expired = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        Body::new(DeadlineBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep(body_timeout)),
            expired: expired.clone(),
        })
    });
    let limit = guard.limits.request_timeout();
    let response = match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => return Rejection::Timeout(limit).into_response(),
    };
    if expired.load(Ordering::Acquire) {
        // The handler saw a body error and answered 400 or 413; the cause was the deadline.
        // The rest of the body may still come: this connection cannot carry another request.
        let mut response = Rejection::BodyTimeout(body_timeout).into_response();
        response.headers_mut().insert(header::CONNECTION, CLOSE);
        return response;
    }
    response
}

/// The per-client middleware, inside authentication: request rate, live streams.
pub async fn per_client(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let client = client_key(&request);
    if !UNLIMITED_PATHS.contains(&request.uri().path())
        && let Err(rejection) = guard.admit(&client)
    {
        return refuse(request, rejection).await;
    }
    let response = next.run(request).await;
    if !is_event_stream(&response) {
        return response;
    }
    match guard.open_stream(client) {
        // Dropping the response drops its stream unpolled: nothing was sent.
        Err(rejection) => rejection.into_response(),
        Ok(None) => response,
        Ok(Some(slot)) => response.map(|body| {
            Body::new(HoldingBody {
                inner: body,
                _held: slot,
            })
        }),
    }
}

/// A refused request's small body is read first (at most [`DRAIN_MAX`] bytes within
/// [`DRAIN_WAIT`]), so the connection stays usable; otherwise the answer says `Connection:
/// close`, and the client knows not to send the next request on it.
async fn refuse(request: Request, rejection: Rejection) -> Response {
    let mut response = rejection.into_response();
    if http_body::Body::size_hint(request.body()).exact() != Some(0) {
        let body = axum::body::to_bytes(request.into_body(), DRAIN_MAX);
        if !matches!(tokio::time::timeout(DRAIN_WAIT, body).await, Ok(Ok(_))) {
            response.headers_mut().insert(header::CONNECTION, CLOSE);
        }
    }
    response
}

const DRAIN_MAX: usize = 64 * 1024;
const DRAIN_WAIT: Duration = Duration::from_secs(1);
const CLOSE: HeaderValue = HeaderValue::from_static("close");

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// The error a body read returns once its deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyDeadline;

/// A request body that fails once its deadline passes (and says so through `expired`).
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.expired.store(true, Ordering::Release);
                Poll::Ready(Some(Err(axum::Error::new(BodyDeadline))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that holds something until it is dropped (a stream slot).
pub(crate) struct HoldingBody<T> {
    pub(crate) inner: Body,
    pub(crate) _held: T,
}

impl<T: Send + Unpin + 'static> http_body::Body for HoldingBody<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `Duration` of a whole number of seconds, rounded up, for `Retry-After`.
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(n: u8) -> ClientKey {
        ClientKey::Peer(IpAddr::from([10, 0, 0, n]))
    }

    #[test]
    fn a_client_over_its_burst_waits_while_another_is_served() {
        let guard = Guard::new(HttpLimits {
            rate_per_s: 1,
            rate_burst: 2,
            ..HttpLimits::default()
        });
        assert!(guard.admit(&peer(1)).is_ok());
        assert!(guard.admit(&peer(1)).is_ok());
        match guard.admit(&peer(1)) {
            Err(Rejection::RateLimited { retry_after_s, .. }) => assert_eq!(retry_after_s, 1),
            other => panic!("expected a rate limit, got {other:?}"),
        }
        assert!(guard.admit(&peer(2)).is_ok());
    }

    #[test]
    fn stream_slots_return_when_dropped_and_leave_no_entry() {
        let guard = Guard::new(HttpLimits {
            sse_per_client: 2,
            ..HttpLimits::default()
        });
        let first = guard.open_stream(peer(1)).unwrap();
        let second = guard.open_stream(peer(1)).unwrap();
        assert!(matches!(
            guard.open_stream(peer(1)),
            Err(Rejection::TooManyStreams { max: 2 })
        ));
        assert!(guard.open_stream(peer(2)).unwrap().is_some());
        drop(first);
        let third = guard.open_stream(peer(1)).unwrap();
        drop((second, third));
        assert_eq!(guard.streams_held(), 0);
        assert!(guard.streams.lock().unwrap().is_empty());
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
