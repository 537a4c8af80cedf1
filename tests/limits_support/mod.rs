//! Helpers of `tests/http_limits.rs`: raw sockets, a `cairn serve` child under a file
//! descriptor limit, and the scenarios that need a database that goes away (a TCP proxy cut
//! between cairn and PostgreSQL).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::config::Config;
use cairn::http::HttpLimits;
use cairn::store::Store;
use cairn::store::postgres::{PgStore, PoolOptions};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::api_support::{TestServer, assert_problem, header, task_body, test_config};
use crate::common::TestPg;
use crate::fault_proxy::FaultProxy;

pub fn addr_of(server: &TestServer) -> SocketAddr {
    server
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("server address")
}

/// True when the peer closes `conn` (EOF or reset) within `within`; data read is discarded.
pub async fn closes_within(conn: &mut TcpStream, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Writes `request` and reads one response (head and `Content-Length` body) as text.
pub async fn raw_exchange(conn: &mut TcpStream, request: &[u8]) -> String {
    conn.write_all(request).await.expect("write request");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            let n = conn.read(&mut buf).await.expect("read response");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|line| {
                        let (name, value) = line.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + length {
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("a response within 10 s");
    String::from_utf8_lossy(&got).to_string()
}

/// A `cairn serve` child on a SQLite file, started under `ulimit -n fd_limit`.
pub struct LimitedServe {
    pub child: Child,
    pub addr: SocketAddr,
}

pub async fn serve_with_fd_limit(
    sqlite: &std::path::Path,
    fd_limit: u32,
    env: &[(&str, &str)],
) -> LimitedServe {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {fd_limit} && exec \"$0\" serve"))
        .arg(env!("CARGO_BIN_EXE_cairn"))
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_DATABASE_URL")
        .env_remove("CAIRN_CONFIG")
        .env("CAIRN_LISTEN_ADDR", "127.0.0.1:0")
        .env("CAIRN_SQLITE_PATH", sqlite)
        .env("CAIRN_WORKERS", "1")
        .env("RUST_LOG", "cairn=info,warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    command.envs(env.iter().copied());
    start(command).await
}

async fn start(mut command: Command) -> LimitedServe {
    let mut child = command.spawn().expect("spawn cairn serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            if let Some(addr) = line.strip_prefix(cairn::server::LISTENING_PREFIX) {
                return addr.trim().parse::<SocketAddr>().expect("bound address");
            }
        }
        panic!("cairn serve exited before printing its address");
    })
    .await
    .expect("cairn serve started within 60 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    LimitedServe { child, addr }
}

impl LimitedServe {
    /// SIGTERM, then a clean exit within 30 s.
    pub async fn terminate(mut self) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("exit within 30 s of SIGTERM")
            .expect("wait");
        assert_eq!(exit.code(), Some(0), "cairn serve exits 0");
    }
}

/// A test database reached through a proxy the test can cut: (database, proxy, URL via it).
async fn database_behind_proxy() -> (TestPg, FaultProxy, String) {
    let db = TestPg::create().await;
    let mut url = reqwest::Url::parse(&db.url).expect("database url");
    let upstream: SocketAddr = format!(
        "{}:{}",
        url.host_str().expect("host"),
        url.port().unwrap_or(5432)
    )
    .parse()
    .expect("the test database is at an IP address");
    let proxy = FaultProxy::start(upstream).await;
    url.set_host(Some("127.0.0.1")).expect("host");
    url.set_port(Some(proxy.addr().port())).expect("port");
    (db, proxy, url.to_string())
}

/// Times one request and checks it is a 503 `/problems/unavailable` with `Retry-After`.
async fn unavailable_within(request: reqwest::RequestBuilder, within: Duration) {
    let started = Instant::now();
    let response = request.send().await.expect("an answer");
    let elapsed = started.elapsed();
    assert!(!header(&response, "retry-after").is_empty(), "Retry-After");
    assert_problem(response, 503, "/problems/unavailable").await;
    assert!(elapsed < within, "answered after {elapsed:?}");
}

/// `cairn serve` on Postgres; the database goes away: POST and GET answer 503 with
/// `Retry-After` within 3 s (the 2 s acquire timeout), `/readyz` too, `/healthz` stays 200;
/// when the database is back, so is the API.
pub async fn database_down_scenario() {
    let (db, proxy, url) = database_behind_proxy().await;
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .arg("serve")
        .env_remove("DATABASE_URL")
        .env_remove("CAIRN_CONFIG")
        .env("CAIRN_DATABASE_URL", &url)
        .env("CAIRN_LISTEN_ADDR", "127.0.0.1:0")
        .env("CAIRN_WORKERS", "1")
        .env("RUST_LOG", "cairn=error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let serve = start(command).await;
    let base = format!("http://{}", serve.addr);
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{base}/v1/tasks"))
        .json(&task_body("before the outage"))
        .send()
        .await
        .expect("POST");
    assert_eq!(created.status(), 202);
    let task: serde_json::Value = created.json().await.expect("task");

    proxy.cut();
    let within = Duration::from_secs(3);
    let post = client.post(format!("{base}/v1/tasks"));
    unavailable_within(post.json(&task_body("during the outage")), within).await;
    let get = client.get(format!("{base}/v1/tasks/{}", task["id"].as_str().unwrap()));
    unavailable_within(get, within).await;
    unavailable_within(client.get(format!("{base}/readyz")), within).await;
    let live = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(live.status(), 200, "liveness does not need the database");

    proxy.restore();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
        if ready.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not ready 20 s after the database returned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = client
        .post(format!("{base}/v1/tasks"))
        .json(&task_body("after"));
    assert_eq!(after.send().await.unwrap().status(), 202);
    serve.terminate().await;
    db.drop_database().await;
}

/// A request that waits longer than `request_timeout_ms` (here on a pool whose acquire
/// timeout is longer, with the database gone) is answered 503 `/problems/timeout` on time.
/// The pool does not ping a connection before handing it out, so a request that finds one of
/// the (at most 2) pooled connections the cut killed fails at once, 503 `/problems/unavailable`
/// (the connection is then dropped); once none is left, a request waits for a new connection.
pub async fn request_timeout_scenario() {
    let (db, proxy, url) = database_behind_proxy().await;
    let options = PoolOptions {
        max_connections: 2,
        acquire_timeout: Duration::from_secs(20),
        commit_writers: cairn::store::postgres::DEFAULT_COMMIT_WRITERS,
    };
    let store: Arc<dyn Store> = Arc::new(PgStore::connect_with(&url, options).await.unwrap());
    store.migrate().await.expect("migrate");
    let config = Config {
        http: HttpLimits {
            request_timeout_ms: 500,
            ..HttpLimits::default()
        },
        ..test_config()
    };
    let server = TestServer::start(store, config).await;
    assert_eq!(server.get("/v1/tasks").await.status(), 200);
    proxy.cut();
    let mut dead = 0;
    let (response, elapsed) = loop {
        let started = Instant::now();
        let response = server.get("/v1/tasks").await;
        let elapsed = started.elapsed();
        assert_eq!(header(&response, "retry-after"), "1");
        if elapsed >= Duration::from_millis(450) || dead == 2 {
            break (response, elapsed);
        }
        assert_problem(response, 503, "/problems/unavailable").await;
        dead += 1;
    };
    assert_problem(response, 503, "/problems/timeout").await;
    assert!(
        elapsed >= Duration::from_millis(450) && elapsed < Duration::from_secs(3),
        "answered after {elapsed:?}"
    );
    proxy.restore();
    server.shutdown().await;
    db.drop_database().await;
}

/// `cairn serve` under `ulimit -n 1024` with 1,100 idle sockets open: the oldest idle ones are
/// shed, `/healthz` answers at once and a real request works.
pub async fn descriptor_flood_scenario() {
    let db = crate::common::TestSqlite::create();
    let serve = serve_with_fd_limit(
        &db.path,
        1_024,
        &[
            ("CAIRN_HTTP_HEADER_TIMEOUT_MS", "60000"),
            ("CAIRN_HTTP_IDLE_TIMEOUT_MS", "60000"),
        ],
    )
    .await;
    let mut idle = Vec::with_capacity(1_100);
    for _ in 0..1_100 {
        idle.push(TcpStream::connect(serve.addr).await.expect("connect"));
    }
    let started = Instant::now();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let response = client
        .get(format!("http://{}/healthz", serve.addr))
        .send()
        .await
        .expect("/healthz answers with every descriptor taken");
    assert_eq!(response.status(), 200);
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(5),
        "answered after {elapsed:?}"
    );
    // The server is still itself: a real request works.
    let created = client
        .post(format!("http://{}/v1/tasks", serve.addr))
        .json(&task_body("after the flood"))
        .send()
        .await
        .expect("POST");
    assert_eq!(created.status(), 202);
    drop(idle);
    serve.terminate().await;
}

/// Two API keys from one address: the request rate counts per key, so one key over its rate
/// gets 429 while the other, from the same peer, is served.
pub async fn per_key_rate_scenario() {
    use cairn::store::keys::{Scope, generate_key};
    let db = crate::api_support::Db::create().await;
    let store = db.store().await;
    let mut tokens = Vec::new();
    for tenant in ["alpha", "beta"] {
        let generated = generate_key(tenant, vec![Scope::Read], None).expect("key");
        store
            .create_api_key(generated.new, chrono::Utc::now())
            .await
            .expect("store key");
        tokens.push(generated.token.expose().to_string());
    }
    let limits = HttpLimits {
        rate_per_s: 1,
        rate_burst: 3,
        ..HttpLimits::default()
    };
    let config = Config {
        http: limits,
        ..test_config()
    };
    let server = TestServer::start(store, config).await;
    let http = reqwest::Client::new();
    let url = server.url("/v1/tasks");
    let get = |token: &str| http.get(&url).bearer_auth(token.to_string()).send();
    let mut served = 0;
    let limited = loop {
        let response = get(&tokens[0]).await.expect("GET");
        if response.status() == 429 {
            break response;
        }
        assert_eq!(response.status(), 200);
        served += 1;
        assert!(served < 10, "a burst of 3 at 1/s never ran out");
    };
    assert_problem(limited, 429, "/problems/rate-limited").await;
    let other = get(&tokens[1]).await.expect("GET");
    assert_eq!(
        other.status(),
        200,
        "another key from the same address is served"
    );
    server.shutdown().await;
    db.drop().await;
}
