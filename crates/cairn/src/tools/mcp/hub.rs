//! The MCP client: one connection per server endpoint, opened on first use and again after a
//! failure, speaking streamable HTTP through the official SDK (`rmcp`).
//!
//! The 2026-07-28 revision is tried first (`server/discover`, every request self-contained);
//! a server on 2025-11-25 is answered the older way (`initialize`, a session id), which the
//! SDK keeps and renews. A call's W3C trace context travels in `params._meta`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation, InputRequiredResult, ProtocolVersion, Tool,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::SseRetryPolicy;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError};
use serde_json::Value;
use tokio::sync::Mutex;

use super::config::McpServerSpec;
pub use super::error::McpError;
use super::oauth::TokenCache;
use crate::secret::Secret;

type Running = RunningService<RoleClient, ClientConfig>;

/// How a stream the server closed is resumed (a GET with `Last-Event-ID`, after the server's
/// `retry` hint): a few times, then the request fails, so a server that is gone fails its call
/// within seconds instead of at its deadline. A read is then retried by the repair ladder, and
/// a write is never sent again (its intent).
#[derive(Debug)]
struct Resume;

impl SseRetryPolicy for Resume {
    fn retry(&self, tries: usize) -> Option<Duration> {
        (tries < 3).then_some(Duration::from_millis(500))
    }
}

/// An open connection, and the bearer token it was opened with (a renewed token reconnects).
struct Open {
    running: Arc<Running>,
    token: Option<Secret>,
}

/// A server's answer to a listing.
pub struct Listing {
    pub tools: Vec<Tool>,
    /// How long the server says the list may be cached.
    pub ttl: Option<Duration>,
    pub protocol: String,
}

/// One call.
pub struct McpCall<'a> {
    pub server: &'a McpServerSpec,
    /// The server's URL, or its sandbox's.
    pub url: &'a str,
    pub tool: &'a str,
    pub args: &'a Value,
    pub traceparent: Option<String>,
}

/// Connections to the registered servers. Cheap to share.
pub struct McpHub {
    http: reqwest::Client,
    live: Mutex<HashMap<String, Open>>,
    tokens: TokenCache,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").finish_non_exhaustive()
    }
}

impl Default for McpHub {
    fn default() -> Self {
        McpHub::new(reqwest::Client::new())
    }
}

impl McpHub {
    pub fn new(http: reqwest::Client) -> McpHub {
        McpHub {
            tokens: TokenCache::new(http.clone()),
            http,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// Every tool the server lists (following pagination), with its cache hint.
    pub async fn list(&self, server: &McpServerSpec) -> Result<Listing, McpError> {
        let timeout = Duration::from_millis(server.timeout_ms);
        let running = self.connect(server, &server.url).await?;
        let protocol = running
            .peer_info()
            .map(|info| info.protocol_version.to_string())
            .unwrap_or_default();
        let listed = tokio::time::timeout(timeout, running.peer().list_all_tools_with_cache_hint())
            .await
            .map_err(|_| McpError::Timeout(server.timeout_ms))
            .and_then(|result| result.map_err(classify));
        match listed {
            Ok(list) => Ok(Listing {
                tools: list.items,
                ttl: list.ttl_ms.map(Duration::from_millis),
                protocol,
            }),
            Err(error) => {
                self.forget(&server.url).await;
                Err(error)
            }
        }
    }

    /// Calls a tool. `input_required` ends the call (no rounds are driven); a deadline drops
    /// the request, which cancels it at the server.
    pub async fn call(&self, call: McpCall<'_>) -> Result<CallToolResult, McpError> {
        let running = self.connect(call.server, call.url).await?;
        let mut params = CallToolRequestParams::new(call.tool.to_string());
        params.arguments = match call.args {
            Value::Object(map) => Some(map.clone()),
            Value::Null => None,
            other => {
                return Err(McpError::Refused(format!(
                    "arguments must be an object, got {other}"
                )));
            }
        };
        if let Some(traceparent) = call.traceparent {
            let mut meta = rmcp::model::RequestMetaObject::default();
            meta.0
                .insert("traceparent".into(), Value::String(traceparent));
            params.meta = Some(meta);
        }
        let timeout_ms = call.server.timeout_ms;
        let result = tokio::time::timeout(
            Duration::from_millis(timeout_ms),
            running.call_tool_once(params),
        )
        .await;
        match result {
            Ok(Ok(CallToolResponse::Complete(answer))) => Ok(answer),
            Ok(Ok(CallToolResponse::InputRequired(asked))) => {
                Err(McpError::InputRequired(asked_for(&asked)))
            }
            Ok(Ok(CallToolResponse::Task(_))) => Err(McpError::Refused(
                "the server answered with a task to poll (the tasks extension), which cairn \
                 does not follow"
                    .into(),
            )),
            Ok(Ok(_)) => Err(McpError::Refused(
                "the server answered a tools/call with a result of a kind cairn does not know"
                    .into(),
            )),
            Ok(Err(error)) => {
                let error = classify(error);
                if matches!(error, McpError::Transport(_) | McpError::Connect(_)) {
                    self.forget(call.url).await;
                }
                Err(error)
            }
            Err(_) => {
                // A request that outlived its deadline leaves the connection suspect.
                self.forget(call.url).await;
                Err(McpError::Timeout(timeout_ms))
            }
        }
    }

    async fn forget(&self, url: &str) {
        self.live.lock().await.remove(url);
    }

    /// The open connection to `url`, or a new one. The handshake runs outside the lock, so a
    /// slow server holds up no call to another; two calls that open the same connection at
    /// once keep the later one.
    async fn connect(&self, server: &McpServerSpec, url: &str) -> Result<Arc<Running>, McpError> {
        let token = self.tokens.bearer(server).await?;
        if let Some(open) = self.live.lock().await.get(url)
            && !open.running.is_closed()
            && open.token == token
        {
            return Ok(open.running.clone());
        }
        let running = Arc::new(self.handshake(server, url, &token).await?);
        self.live.lock().await.insert(
            url.to_string(),
            Open {
                running: running.clone(),
                token,
            },
        );
        Ok(running)
    }
}

impl McpHub {
    /// Opens a session: the 2026-07-28 revision first; a server that answers `server/discover`
    /// with anything but a discovery result (some answer any unknown method with an empty
    /// result) is asked the 2025-11-25 way, `initialize`.
    async fn handshake(
        &self,
        server: &McpServerSpec,
        url: &str,
        token: &Option<Secret>,
    ) -> Result<Running, McpError> {
        let auto = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        match self.open(server, url, token, auto).await {
            Err(McpError::Transport(first)) => self
                .open(server, url, token, ClientLifecycleMode::Initialize)
                .await
                .map_err(|second| {
                    McpError::Connect(format!("{first}; then, asked to initialize: {second}"))
                }),
            other => other,
        }
    }

    /// One handshake in `lifecycle`: `Connect` when nothing answered, `Transport` when the
    /// server answered the handshake wrongly.
    async fn open(
        &self,
        server: &McpServerSpec,
        url: &str,
        token: &Option<Secret>,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Running, McpError> {
        let mut headers = HashMap::new();
        for (name, value) in &server.headers {
            let (Ok(name), Ok(value)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                reqwest::header::HeaderValue::from_str(value.expose()),
            ) else {
                continue;
            };
            headers.insert(name, value);
        }
        let mut config =
            StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(headers);
        config.retry_config = Arc::new(Resume);
        if let Some(token) = token {
            config = config.auth_header(token.expose().to_string());
        }
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        // `initialize` offers the latest revision that has it; discovery offers its own list.
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("cairn", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25);
        let timeout_ms = server.timeout_ms;
        match tokio::time::timeout(
            Duration::from_millis(timeout_ms),
            client.serve_with_lifecycle(transport, lifecycle),
        )
        .await
        {
            Err(_) => Err(McpError::Connect(format!(
                "no handshake within {timeout_ms} ms"
            ))),
            Ok(Ok(running)) => Ok(running),
            Ok(Err(error)) if connect_refused(&error) => Err(McpError::Connect(chain(&error))),
            Ok(Err(error)) => Err(McpError::Transport(chain(&error))),
        }
    }
}

/// What an `input_required` result asks for: its requests' methods.
fn asked_for(asked: &InputRequiredResult) -> String {
    let requests = serde_json::to_value(&asked.input_requests).unwrap_or_default();
    let mut methods: Vec<String> = requests
        .as_object()
        .map(|map| {
            map.values()
                .filter_map(|request| request.get("method").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    methods.sort();
    methods.dedup();
    if methods.is_empty() {
        "input the server did not name".into()
    } else {
        methods.join(", ")
    }
}

/// Sorts an SDK error into what it means for the call.
fn classify(error: ServiceError) -> McpError {
    match &error {
        ServiceError::McpError(data) => McpError::Refused(data.message.to_string()),
        ServiceError::Timeout { timeout } => McpError::Timeout(timeout.as_millis() as u64),
        ServiceError::TransportSend(_) if connect_refused(&error) => {
            McpError::Connect(chain(&error))
        }
        _ => McpError::Transport(chain(&error)),
    }
}

/// Whether the error comes from a connection that was never made.
fn connect_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(current) = source {
        if let Some(http) = current.downcast_ref::<reqwest::Error>()
            && http.is_connect()
        {
            return true;
        }
        // The SDK keeps the HTTP client's error inside its own, without a source link.
        if let Some(StreamableHttpError::Client(http)) =
            current.downcast_ref::<StreamableHttpError<reqwest::Error>>()
            && http.is_connect()
        {
            return true;
        }
        source = current.source();
    }
    false
}

/// An error and its causes, on one line.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    crate::schema::truncate(&without_type_names(&message), 600)
}

/// The SDK names its transport by Rust type (`Transport [rmcp::...<reqwest::...>] error: `):
/// noise to an operator, dropped.
fn without_type_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find("Transport [") {
        let Some(end) = rest[start..].find("] error: ") else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + end + "] error: ".len()..];
    }
    out.push_str(rest);
    out
}
