//! The accept loop and the connections under the router: hyper's HTTP/1 with a header read
//! timeout, an idle keep-alive timeout, a connection limit, and load shedding.
//!
//! At `max_connections`, or when `accept` fails because the process has no file descriptor
//! left (EMFILE/ENFILE), the oldest idle connection (no request in flight, nothing heard since
//! its last response) is closed so that the new one is served; a new connection with nothing
//! to shed is answered 503 `/problems/overloaded` and closed. The loop never spins on an accept
//! error: it waits for a shed connection to close, or pauses.
//!
//! Each connection gets TCP_NODELAY (small writes such as an SSE event or a 202 go out at once
//! instead of waiting on Nagle's algorithm) and its peer address as
//! `ConnectInfo<SocketAddr>`. On shutdown the loop stops accepting, every connection finishes its
//! request in flight and closes, and the loop returns once all are closed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::ServiceExt;

use super::conn_io::Socket;
use super::guard::HoldingBody;
use super::limits::{HttpLimits, Rejection};

/// How long the loop waits for a shed connection to close before accepting again.
const SHED_WAIT: Duration = Duration::from_millis(100);
/// The pause after an accept error with nothing to shed.
const ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` until `stopping` turns true (see the module docs).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    mut stopping: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let tracker = Arc::new(Tracker::default());
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout())
        .keep_alive(true);
    let builder = Arc::new(builder);
    // Every connection task holds a receiver; `closed()` resolves when the last one ends.
    let (alive, alive_rx) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                pause_after(&error, &tracker).await;
                continue;
            }
        };
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        if tracker.len() >= limits.max_connections && !tracker.shed_oldest_idle() {
            tokio::spawn(refuse(tcp, limits.max_connections));
            continue;
        }
        let connection = Connection {
            state: tracker.register(),
            tracker: tracker.clone(),
            app: app.clone(),
            builder: builder.clone(),
            idle_timeout: limits.idle_timeout(),
            stopping: stopping.clone(),
            _alive: alive_rx.clone(),
        };
        tokio::spawn(connection.run(tcp, peer));
    }
    drop(listener);
    drop(alive_rx);
    alive.closed().await;
    Ok(())
}

/// What the loop does after a failed `accept`: shed an idle connection when descriptors ran
/// out, and wait either way, so a persistent error never turns into a busy loop.
async fn pause_after(error: &std::io::Error, tracker: &Tracker) {
    let exhausted = matches!(error.raw_os_error(), Some(EMFILE | ENFILE));
    let freed = tracker.closed.notified();
    tokio::pin!(freed);
    freed.as_mut().enable();
    if exhausted && tracker.shed_oldest_idle() {
        tracing::debug!("out of file descriptors: closed the oldest idle connection");
        let _ = tokio::time::timeout(SHED_WAIT, freed).await;
    } else {
        tracing::warn!(%error, "accept failed");
        let _ = tokio::time::timeout(ERROR_PAUSE, freed).await;
    }
}

/// Linux's "too many open files" (process, then system).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// Answers one request with 503 `/problems/overloaded` and closes.
async fn refuse(tcp: TcpStream, max: usize) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(1))
        .keep_alive(false);
    let service = hyper::service::service_fn(move |_request: hyper::Request<Incoming>| {
        use axum::response::IntoResponse;
        let mut response = Rejection::Overloaded { max }.into_response();
        response.headers_mut().insert(
            axum::http::header::X_CONTENT_TYPE_OPTIONS,
            axum::http::HeaderValue::from_static("nosniff"),
        );
        std::future::ready(Ok::<_, std::convert::Infallible>(response))
    });
    let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
}

/// The connections held now, for shedding and counting.
#[derive(Default)]
struct Tracker {
    conns: Mutex<BTreeMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
    /// Signalled whenever a connection closes.
    closed: Notify,
    epoch: std::sync::OnceLock<Instant>,
}

impl Tracker {
    fn now_ms(&self) -> u64 {
        let epoch = *self.epoch.get_or_init(Instant::now);
        epoch.elapsed().as_millis() as u64
    }

    fn len(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn register(&self) -> Arc<ConnState> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState {
            id,
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(self.now_ms()),
            heard: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            close: Notify::new(),
        });
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.insert(id, state.clone());
        state
    }

    fn remove(&self, id: u64) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        self.closed.notify_waiters();
    }

    /// Closes the connection that has been idle longest; false when none is idle.
    fn shed_oldest_idle(&self) -> bool {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = conns
            .values()
            .filter(|conn| conn.is_idle() && !conn.closing.load(Ordering::Acquire))
            .min_by_key(|conn| conn.idle_since_ms.load(Ordering::Acquire));
        match oldest {
            Some(conn) => {
                conn.closing.store(true, Ordering::Release);
                conn.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// One connection's state, shared by its task, its requests and the tracker.
struct ConnState {
    id: u64,
    /// Requests whose responses have not been sent (or dropped) yet.
    in_flight: AtomicUsize,
    /// When the last response ended, or the connection opened (ms since the tracker's epoch).
    idle_since_ms: AtomicU64,
    /// Bytes arrived since then: a request head is on its way.
    heard: AtomicBool,
    closing: AtomicBool,
    close: Notify,
}

impl ConnState {
    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0 && !self.heard.load(Ordering::Acquire)
    }
}

/// Held by a request from its start until its response body is sent or dropped.
struct Busy {
    state: Arc<ConnState>,
    tracker: Arc<Tracker>,
}

impl Busy {
    fn begin(state: &Arc<ConnState>, tracker: &Arc<Tracker>) -> Busy {
        state.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy {
            state: state.clone(),
            tracker: tracker.clone(),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.state
            .idle_since_ms
            .store(self.tracker.now_ms(), Ordering::Release);
        self.state.heard.store(false, Ordering::Release);
        self.state.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Everything one connection task needs.
struct Connection {
    state: Arc<ConnState>,
    tracker: Arc<Tracker>,
    app: Router,
    builder: Arc<http1::Builder>,
    idle_timeout: Duration,
    stopping: watch::Receiver<bool>,
    _alive: watch::Receiver<()>,
}

impl Connection {
    async fn run(mut self, tcp: TcpStream, peer: SocketAddr) {
        let (state, tracker, app) = (self.state.clone(), self.tracker.clone(), self.app.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let busy = Busy::begin(&state, &tracker);
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let app = app.clone();
            async move {
                let response = app.oneshot(request).await?;
                Ok::<_, std::convert::Infallible>(
                    response.map(|inner| HoldingBody { inner, _held: busy }),
                )
            }
        });
        let heard = self.state.clone();
        let io = TokioIo::new(Socket::new(tcp, move || {
            heard.heard.store(true, Ordering::Release)
        }));
        let conn = self.builder.serve_connection(io, service);
        tokio::pin!(conn);
        let mut draining = false;
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%error, %peer, "connection ended with an error");
                    }
                    break;
                }
                _ = self.state.close.notified() => break,
                _ = idle_expired(&self.state, &self.tracker, self.idle_timeout) => break,
                _ = self.stopping.wait_for(|stop| *stop), if !draining => {
                    conn.as_mut().graceful_shutdown();
                    draining = true;
                }
            }
        }
        self.tracker.remove(self.state.id);
    }
}

/// Resolves once the connection has been idle (see [`ConnState::is_idle`]) for `timeout`.
async fn idle_expired(state: &ConnState, tracker: &Tracker, timeout: Duration) {
    let timeout_ms = timeout.as_millis() as u64;
    loop {
        let wait_ms = if state.is_idle() {
            let idle_ms = tracker
                .now_ms()
                .saturating_sub(state.idle_since_ms.load(Ordering::Acquire));
            if idle_ms >= timeout_ms {
                return;
            }
            timeout_ms - idle_ms
        } else {
            timeout_ms
        };
        tokio::time::sleep(Duration::from_millis(wait_ms.max(1))).await;
    }
}
