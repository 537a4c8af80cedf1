//! The processes of the live-model test: a real local model (llama.cpp through
//! `scripts/model_server.py`), an in-process recording proxy in front of it and of the
//! simulated tools, `cairn sim` serving the tools, and `cairn serve` itself. Every child is
//! killed when its handle drops; everything listens on 127.0.0.1.
//!
//! Logs of the children go to files under `target/tmp/live_model/` (kept after the run) so a
//! failure can be read without flooding the test output.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// The model the tests use, as `scripts/install-model.sh` installs it.
pub const DEFAULT_MODEL: &str = ".deps/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// The Python of the virtualenv that holds xllamacpp.
pub const DEFAULT_PYTHON: &str = ".deps/llama/bin/python";
/// What the model server prints once the model is loaded.
pub const MODEL_LISTENING_PREFIX: &str = "model-server: listening on ";

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path from the environment variable `var`, or `default` under the repository root.
pub fn path_from_env(var: &str, default: &str) -> PathBuf {
    match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => PathBuf::from(value),
        _ => root().join(default),
    }
}

/// Where the children's logs and the proxy's records are written (kept after the run).
pub fn log_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("live_model");
    std::fs::create_dir_all(&dir).expect("create the live_model log directory");
    dir
}

/// The last `lines` lines of a log file, for failure messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Reads lines of `reader` until `find` returns something, copying each line to `log`; then
/// keeps draining the rest into `log` in the background.
async fn read_until<T>(
    reader: impl AsyncRead + Unpin + Send + 'static,
    log: &Path,
    wait: Duration,
    what: &str,
    find: impl Fn(&str) -> Option<T>,
) -> T {
    let mut lines = BufReader::new(reader).lines();
    let mut seen = String::new();
    let found = tokio::time::timeout(wait, async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push_str(&line);
            seen.push('\n');
            if let Some(found) = find(&line) {
                return Some(found);
            }
        }
        None
    })
    .await;
    std::fs::write(log, &seen).expect("write log file");
    let found = match found {
        Ok(Some(found)) => found,
        Ok(None) => panic!(
            "{what} exited before it was ready; its output ({}):\n{}",
            log.display(),
            tail(log, 40)
        ),
        Err(_) => panic!(
            "{what} was not ready within {wait:?}; its output ({}):\n{}",
            log.display(),
            tail(log, 40)
        ),
    };
    let log = log.to_path_buf();
    tokio::spawn(async move {
        let mut file = tokio::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .await
            .expect("open log file");
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = file.write_all(line.as_bytes()).await;
            let _ = file.write_all(b"\n").await;
        }
    });
    found
}

fn log_file(path: &Path) -> Stdio {
    Stdio::from(std::fs::File::create(path).expect("create log file"))
}

/// An HTTP client that never goes through an environment proxy.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client")
}

// ---------------------------------------------------------------------------------------------
// The model server.

/// The local model served over an OpenAI-compatible API; killed when dropped.
pub struct ModelServer {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    pub model: PathBuf,
    pub load_time: Duration,
}

impl ModelServer {
    /// Starts `scripts/model_server.py` on port 0 and waits (up to 120 s) for the model to load.
    /// Fails, never skips, when the model or its server is not installed.
    pub async fn start(parallel: u32, ctx: u32) -> ModelServer {
        let model = path_from_env("CAIRN_LIVE_MODEL", DEFAULT_MODEL);
        let python = path_from_env("CAIRN_LIVE_PYTHON", DEFAULT_PYTHON);
        let script = root().join("scripts/model_server.py");
        let install = "install it with ./scripts/install-model.sh (scripts/test.sh and \
                       scripts/install-test-deps.sh do), or point CAIRN_LIVE_MODEL / \
                       CAIRN_LIVE_PYTHON at an installed one";
        assert!(
            model.is_file(),
            "live model test: no model at {} (CAIRN_LIVE_MODEL); {install}",
            model.display()
        );
        assert!(
            python.is_file(),
            "live model test: no model-server Python at {} (CAIRN_LIVE_PYTHON); {install}",
            python.display()
        );
        let log = log_dir().join("model_server.log");
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let started = Instant::now();
        let mut child = Command::new(&python)
            .arg(&script)
            .arg("--model")
            .arg(&model)
            .args(["--port", "0"])
            .args(["--parallel", &parallel.to_string()])
            .args(["--ctx", &ctx.to_string()])
            .args(["--threads", &threads.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file(&log.with_extension("stderr.log")))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "live model test: cannot run {} {}: {error}; {install}",
                    python.display(),
                    script.display()
                )
            });
        let stdout = child.stdout.take().expect("piped stdout");
        let base_url = read_until(
            stdout,
            &log,
            Duration::from_secs(120),
            "the model server (scripts/model_server.py)",
            |line| {
                line.strip_prefix(MODEL_LISTENING_PREFIX)
                    .map(|url| url.trim().trim_end_matches('/').to_string())
            },
        )
        .await;
        ModelServer {
            child,
            base_url,
            model,
            load_time: started.elapsed(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The recording proxy.

/// One request the proxy forwarded, with its answer.
#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    pub seq: usize,
    /// `model` or `tools`.
    pub upstream: &'static str,
    pub method: String,
    pub path: String,
    /// `X-Cairn-Task`, `-Purpose`, `-Milestone`, `-Attempt` as sent.
    pub task: Option<String>,
    pub purpose: Option<String>,
    pub milestone: Option<String>,
    pub attempt: Option<String>,
    pub idempotency_key: Option<String>,
    /// The request body (JSON, or the raw text as a string).
    pub request: Value,
    /// 0 when the upstream could not be reached.
    pub status: u16,
    pub response: Value,
    pub latency_ms: u64,
    /// The client (cairn) gave up before the answer came, e.g. on its per-call timeout.
    pub client_gone: bool,
}

impl Exchange {
    pub fn is_model_call(&self) -> bool {
        self.upstream == "model" && self.path.ends_with("/chat/completions")
    }

    pub fn is_tool_call(&self, tool: &str) -> bool {
        self.upstream == "tools" && self.path == format!("/tools/{tool}")
    }

    /// A tool call the tool answered without an error.
    pub fn tool_succeeded(&self) -> bool {
        self.status == 200 && self.response.get("error").is_none_or(Value::is_null)
    }

    /// The arguments of a tool call (`{"args": ...}`).
    pub fn args(&self) -> &Value {
        self.request.get("args").unwrap_or(&Value::Null)
    }

    /// The `usage` of a model answer: (prompt, completion, total).
    pub fn usage(&self) -> Option<(u64, u64, u64)> {
        let usage = self.response.get("usage")?;
        let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
        let (prompt, completion) = (field("prompt_tokens"), field("completion_tokens"));
        let total = usage
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt + completion);
        Some((prompt, completion, total))
    }
}

struct ProxyState {
    model: String,
    tools: String,
    http: reqwest::Client,
    records: Mutex<Vec<Exchange>>,
    /// Exchanges forwarded and not yet answered.
    in_flight: AtomicUsize,
}

/// Forwards `/tools/*` and `/sim/*` to the simulator and everything else to the model server,
/// recording every request and answer. Stops when dropped.
pub struct Proxy {
    pub base_url: String,
    state: Arc<ProxyState>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(model_base_url: &str, tools_base_url: &str) -> Proxy {
        let state = Arc::new(ProxyState {
            model: model_base_url.trim_end_matches('/').to_string(),
            tools: tools_base_url.trim_end_matches('/').to_string(),
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(600))
                .build()
                .expect("proxy HTTP client"),
            records: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("proxy serves");
        });
        Proxy {
            base_url: format!("http://{addr}"),
            state,
            task,
        }
    }

    /// Waits (at most `wait`) until every forwarded request has its answer (abandoned ones
    /// included), so the records are complete; returns how many are still open.
    pub async fn settle(&self, wait: Duration) -> usize {
        let until = Instant::now() + wait;
        loop {
            let open = self.state.in_flight.load(Ordering::SeqCst);
            if open == 0 || Instant::now() > until {
                return open;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Everything recorded so far, in arrival order of the answers.
    pub fn records(&self) -> Vec<Exchange> {
        self.state
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn body_value(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// Sets its flag when dropped: the handler's future went away (the client gave up) before the
/// answer came.
struct GoneOnDrop {
    flag: Arc<AtomicBool>,
    armed: bool,
}

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
}

/// The exchange runs in its own task, so a request whose client gives up (cairn's per-call
/// timeout) is still forwarded to its end and recorded, marked `client_gone`.
async fn forward(
    State(state): State<Arc<ProxyState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let gone = Arc::new(AtomicBool::new(false));
    let mut guard = GoneOnDrop {
        flag: gone.clone(),
        armed: true,
    };
    state.in_flight.fetch_add(1, Ordering::SeqCst);
    let job = tokio::spawn(async move {
        let response = exchange(state.clone(), method, uri, headers, body, gone).await;
        state.in_flight.fetch_sub(1, Ordering::SeqCst);
        response
    });
    let response = match job.await {
        Ok(response) => response,
        Err(error) => {
            (StatusCode::BAD_GATEWAY, format!("recording proxy: {error}")).into_response()
        }
    };
    // The answer is being sent: the client waited for it.
    guard.armed = false;
    response
}

async fn exchange(
    state: Arc<ProxyState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    gone: Arc<AtomicBool>,
) -> Response {
    let path = uri.path().to_string();
    let (upstream, base) = if path.starts_with("/tools/") || path.starts_with("/sim/") {
        ("tools", &state.tools)
    } else {
        ("model", &state.model)
    };
    let target = match uri.query() {
        Some(query) => format!("{base}{path}?{query}"),
        None => format!("{base}{path}"),
    };
    let mut request = state.http.request(method.clone(), &target);
    for (name, value) in &headers {
        if ![
            header::HOST,
            header::CONTENT_LENGTH,
            header::CONNECTION,
            header::TRANSFER_ENCODING,
        ]
        .contains(name)
        {
            request = request.header(name, value);
        }
    }
    let started = Instant::now();
    let answer = async {
        let response = request.body(body.clone()).send().await?;
        let status = response.status();
        let kept: Vec<(header::HeaderName, HeaderValue)> = response
            .headers()
            .iter()
            .filter(|(name, _)| {
                *name == header::CONTENT_TYPE
                    || *name == header::RETRY_AFTER
                    || name.as_str().starts_with("x-cairn")
            })
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        let bytes = response.bytes().await?;
        Ok::<_, reqwest::Error>((status, kept, bytes))
    }
    .await;
    let latency_ms = started.elapsed().as_millis() as u64;
    let (status, response) = match answer {
        Ok((status, kept, bytes)) => {
            let value = body_value(&bytes);
            let mut response = (status, bytes).into_response();
            for (name, value) in kept {
                response.headers_mut().insert(name, value);
            }
            (status.as_u16(), (value, response))
        }
        Err(error) => {
            let text = format!("recording proxy: upstream {target} failed: {error}");
            (
                0,
                (
                    Value::String(text.clone()),
                    (StatusCode::BAD_GATEWAY, text).into_response(),
                ),
            )
        }
    };
    let (recorded, response) = response;
    let mut records = state.records.lock().unwrap_or_else(|p| p.into_inner());
    let seq = records.len();
    records.push(Exchange {
        seq,
        upstream,
        method: method.to_string(),
        path,
        task: header_text(&headers, "x-cairn-task"),
        purpose: header_text(&headers, "x-cairn-purpose"),
        milestone: header_text(&headers, "x-cairn-milestone"),
        attempt: header_text(&headers, "x-cairn-attempt"),
        idempotency_key: header_text(&headers, "idempotency-key"),
        request: body_value(&body),
        status,
        response: recorded,
        latency_ms,
        client_gone: gone.load(Ordering::SeqCst),
    });
    response
}

// ---------------------------------------------------------------------------------------------
// The simulated tools and cairn itself.

/// `cairn sim --scenario FILE --port 0`; killed when dropped.
pub struct Sim {
    pub child: Child,
    pub base_url: String,
}

impl Sim {
    pub async fn start(scenario: &Path) -> Sim {
        let log = log_dir().join("sim.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg("sim")
            .arg("--scenario")
            .arg(scenario)
            .args(["--port", "0"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn cairn sim");
        let stderr = child.stderr.take().expect("piped stderr");
        let base_url = read_until(stderr, &log, Duration::from_secs(60), "cairn sim", |line| {
            let at = line.find("base_url=")? + "base_url=".len();
            let url: String = line[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != ',' && *c != '"')
                .collect();
            url.starts_with("http://").then_some(url)
        })
        .await;
        Sim { child, base_url }
    }

    /// The simulator's registry, with every tool's URL pointing at `via` instead of the
    /// simulator, written to `path` (for `CAIRN_TOOLS_FILE`).
    pub async fn write_registry(&self, via: &str, path: &Path) -> Vec<String> {
        let mut registry: Value = http()
            .get(format!("{}/sim/registry.json", self.base_url))
            .send()
            .await
            .expect("GET /sim/registry.json")
            .json()
            .await
            .expect("registry JSON");
        let mut names = Vec::new();
        for tool in registry["tools"].as_array_mut().expect("tools array") {
            let url = tool["url"].as_str().expect("tool url").to_string();
            let path = url
                .strip_prefix(&self.base_url)
                .expect("tool url at the simulator");
            tool["url"] = Value::String(format!("{via}{path}"));
            names.push(tool["name"].as_str().expect("tool name").to_string());
        }
        std::fs::write(path, serde_json::to_vec_pretty(&registry).expect("JSON"))
            .expect("write the tools file");
        names
    }

    pub async fn stats(&self) -> Value {
        http()
            .get(format!("{}/sim/stats", self.base_url))
            .send()
            .await
            .expect("GET /sim/stats")
            .json()
            .await
            .expect("stats JSON")
    }
}

/// `cairn serve` on SQLite and port 0; killed when dropped.
pub struct Serve {
    pub child: Child,
    pub base_url: String,
    pub log: PathBuf,
}

impl Serve {
    pub async fn start(sqlite: &Path, env: &[(&str, &str)]) -> Serve {
        let log = log_dir().join("serve.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
        command
            .arg("serve")
            .env_remove("DATABASE_URL")
            .env_remove("CAIRN_DATABASE_URL")
            .env_remove("CAIRN_CONFIG")
            .env_remove("CAIRN_TEST_MINIMAL_ENGINE")
            .env("CAIRN_SQLITE_PATH", sqlite)
            .env("CAIRN_LISTEN_ADDR", "127.0.0.1:0")
            .env("RUST_LOG", "cairn=info,warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file(&log))
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn cairn serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let addr = read_until(
            stdout,
            &log.with_extension("stdout.log"),
            Duration::from_secs(60),
            "cairn serve",
            |line| {
                line.strip_prefix(cairn::server::LISTENING_PREFIX)
                    .map(|addr| addr.trim().to_string())
            },
        )
        .await;
        Serve {
            child,
            base_url: format!("http://{addr}"),
            log,
        }
    }
}
