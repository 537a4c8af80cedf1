//! The HTTP server's limits, each provoked the way a misbehaving client would: a slowloris
//! head, idle sockets past the connection and file-descriptor limits, a client over its rate,
//! one stream too many, a slow body, oversized heads, and a database that went away. Every
//! refusal must be a problem (application/problem+json with a stable `type`); limits are short
//! settings, and the only waits are the ones each scenario is about.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod api_support;
mod common;
mod fault_proxy;
mod limits_support;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use api_support::{Db, TestServer, assert_problem, header, task_body, test_config};
use cairn::config::Config;
use cairn::http::HttpLimits;
use limits_support::{addr_of, closes_within, raw_exchange};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn with_limits(http: HttpLimits) -> Config {
    Config {
        http,
        ..test_config()
    }
}

/// A client bound to another loopback address: another peer IP, so another client.
fn client_from(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(ip))
        .build()
        .expect("client")
}

#[tokio::test]
async fn a_slowloris_client_is_cut_off_at_the_header_timeout() {
    let db = Db::create().await;
    let limits = HttpLimits {
        header_timeout_ms: 1_500,
        idle_timeout_ms: 1_500,
        ..HttpLimits::default()
    };
    let server = TestServer::start(db.store().await, with_limits(limits)).await;
    let mut slow = TcpStream::connect(addr_of(&server)).await.expect("connect");
    let started = Instant::now();
    let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n\r\n";
    let mut sent = 0;
    // One byte a second, as a slowloris client does, until the server hangs up.
    for byte in head {
        if slow.write_all(&[*byte]).await.is_err() {
            break;
        }
        sent += 1;
        if closes_within(&mut slow, Duration::from_secs(1)).await {
            break;
        }
    }
    let elapsed = started.elapsed();
    assert!(sent < head.len(), "the whole slow head was accepted");
    assert!(
        elapsed >= Duration::from_millis(1_400) && elapsed < Duration::from_millis(3_500),
        "cut off after {elapsed:?}, {sent} bytes"
    );
    // Meanwhile and after, a normal client is served.
    assert_eq!(server.get("/healthz").await.status(), 200);
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_closes_after_the_idle_timeout() {
    let db = Db::create().await;
    let limits = HttpLimits {
        idle_timeout_ms: 400,
        ..HttpLimits::default()
    };
    let server = TestServer::start(db.store().await, with_limits(limits)).await;
    let mut conn = TcpStream::connect(addr_of(&server)).await.expect("connect");
    let answer = raw_exchange(&mut conn, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let started = Instant::now();
    assert!(closes_within(&mut conn, Duration::from_secs(3)).await);
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_millis(1_500),
        "idle connection closed after {elapsed:?}"
    );
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn at_the_connection_limit_the_oldest_idle_connection_makes_room() {
    let db = Db::create().await;
    let limits = HttpLimits {
        max_connections: 4,
        ..HttpLimits::default()
    };
    let server = TestServer::start(db.store().await, with_limits(limits)).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut conn = TcpStream::connect(addr_of(&server)).await.expect("connect");
        // Served once, so the server has surely registered it before the next one.
        let answer = raw_exchange(&mut conn, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        idle.push(conn);
    }
    let fresh = reqwest::Client::new();
    let response = fresh.get(server.url("/healthz")).send().await.expect("GET");
    assert_eq!(
        response.status(),
        200,
        "a new client is served at the limit"
    );
    assert!(
        closes_within(&mut idle[0], Duration::from_secs(2)).await,
        "the oldest idle connection made room"
    );

    // With every connection busy (live streams), a new one is refused with a problem.
    let task = server.create_task("hold streams open").await;
    let mut streams = Vec::new();
    for n in 0..4u8 {
        let client = client_from([127, 0, 1, n + 1]);
        let url = server.url(&format!("/v1/tasks/{}/events", task.id));
        let stream = client.get(url).send().await.expect("SSE");
        assert_eq!(stream.status(), 200);
        streams.push(stream);
    }
    let refused = client_from([127, 0, 2, 1]);
    let response = refused
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("GET");
    assert_eq!(header(&response, "retry-after"), "1");
    assert_problem(response, 503, "/problems/overloaded").await;
    drop(streams);
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn a_client_over_its_rate_gets_429_with_retry_after_while_another_is_served() {
    let db = Db::create().await;
    let limits = HttpLimits {
        rate_per_s: 1,
        rate_burst: 5,
        ..HttpLimits::default()
    };
    let server = TestServer::start(db.store().await, with_limits(limits)).await;
    let greedy = client_from([127, 0, 0, 2]);
    let url = server.url("/v1/tasks");
    // A keep-alive connection of the same client, opened before it runs out of tokens.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut conn = socket.connect(addr_of(&server)).await.expect("connect");
    let mut served = 0;
    let limited = loop {
        let response = greedy.get(&url).send().await.expect("GET");
        if response.status() == 429 {
            break response;
        }
        assert_eq!(response.status(), 200);
        served += 1;
        assert!(served < 10, "a burst of 5 at 1/s never ran out");
    };
    // Right away (a token takes a second to come back): a POST is refused like any request,
    // its body is read so its keep-alive connection carries the next request, and the health
    // probes are never limited.
    let body = task_body("over the rate").to_string();
    let post = format!(
        "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = raw_exchange(&mut conn, post.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        !answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    let probe = raw_exchange(&mut conn, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe}");
    let retry_after: u64 = header(&limited, "retry-after")
        .parse()
        .expect("Retry-After");
    assert_eq!(retry_after, 1, "a token comes back within a second");
    assert_problem(limited, 429, "/problems/rate-limited").await;
    // Another client is served, and nothing was written for the refused POST.
    let other = client_from([127, 0, 0, 3]);
    let tasks: serde_json::Value = other.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(tasks["items"].as_array().map(Vec::len), Some(0));
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn the_stream_over_the_per_client_cap_gets_429_and_a_closed_one_frees_its_slot() {
    let db = Db::create().await;
    let limits = HttpLimits {
        sse_per_client: 3,
        request_timeout_ms: 300,
        ..HttpLimits::default()
    };
    let config = Config {
        sse_keepalive_ms: 100,
        ..with_limits(limits)
    };
    let server = TestServer::start(db.store().await, config).await;
    let task = server.create_task("stream me").await;
    let path = format!("/v1/tasks/{}/events", task.id);
    let client = client_from([127, 0, 0, 4]);
    let mut streams = Vec::new();
    for _ in 0..3 {
        let stream = client.get(server.url(&path)).send().await.expect("SSE");
        assert_eq!(stream.status(), 200);
        streams.push(api_support::SseReader::new(stream));
    }
    let fourth = client.get(server.url(&path)).send().await.expect("SSE");
    assert_eq!(header(&fourth, "retry-after"), "1");
    assert_problem(fourth, 429, "/problems/too-many-streams").await;
    // The JSON form is not a stream, and another client has its own cap.
    let page = client
        .get(server.url(&path))
        .header("accept", "application/json");
    assert_eq!(page.send().await.expect("page").status(), 200);
    let other = client_from([127, 0, 0, 5])
        .get(server.url(&path))
        .send()
        .await;
    assert_eq!(other.expect("SSE").status(), 200);
    // A stream outlives the request time limit (300 ms): keep-alives still flow after it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let frame = tokio::time::timeout(Duration::from_secs(5), streams[0].next_frame()).await;
    assert!(frame.expect("a frame").is_some(), "the stream was cut");
    // Closing a stream frees its slot (the server notices the disconnect on its next write).
    drop(streams.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let again = client.get(server.url(&path)).send().await.expect("SSE");
        if again.status() == 200 {
            break;
        }
        assert_eq!(again.status(), 429);
        assert!(
            Instant::now() < deadline,
            "the closed stream's slot never returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn a_slow_body_gets_408_and_nothing_is_written() {
    let db = Db::create().await;
    let store = db.store().await;
    let limits = HttpLimits {
        body_timeout_ms: 400,
        ..HttpLimits::default()
    };
    let server = TestServer::start(store.clone(), with_limits(limits)).await;
    let mut conn = TcpStream::connect(addr_of(&server)).await.expect("connect");
    let head = "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                Content-Length: 200\r\n\r\n{\"goal\": \"slow";
    let started = Instant::now();
    let answer = raw_exchange(&mut conn, head.as_bytes()).await;
    let elapsed = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(answer.contains("/problems/request-timeout"), "{answer}");
    assert!(
        elapsed < Duration::from_secs(2),
        "answered after {elapsed:?}"
    );
    assert!(api_support::all_tasks(store.as_ref()).await.is_empty());
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn oversized_targets_and_heads_are_problems() {
    let db = Db::create().await;
    let limits = HttpLimits {
        max_uri_bytes: 1_024,
        max_header_bytes: 4_096,
        max_headers: 20,
        ..HttpLimits::default()
    };
    let server = TestServer::start(db.store().await, with_limits(limits)).await;
    let long = server
        .get(&format!("/v1/tasks?cursor={}", "a".repeat(2_000)))
        .await;
    assert_problem(long, 414, "/problems/uri-too-long").await;
    let big = server
        .client
        .get(server.url("/healthz"))
        .header("x-big", "b".repeat(5_000))
        .send()
        .await
        .expect("GET");
    assert_problem(big, 431, "/problems/headers-too-large").await;
    let mut many = server.client.get(server.url("/v1/tasks"));
    for n in 0..30 {
        many = many.header(format!("x-h{n}"), "v");
    }
    assert_problem(
        many.send().await.expect("GET"),
        431,
        "/problems/headers-too-large",
    )
    .await;
    // Past hyper's own limits (a 64 KiB target, 100 headers) and for a head that is not HTTP,
    // hyper answers by itself; that answer is a problem too.
    let huge = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let crowded = format!(
        "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..120)
            .map(|n| format!("x-{n}: v\r\n"))
            .collect::<String>()
    );
    for (request, status, kind) in [
        (huge, 414, "/problems/uri-too-long"),
        (crowded, 431, "/problems/headers-too-large"),
        (
            "NOT\x01HTTP\r\n\r\n".to_string(),
            400,
            "/problems/bad-request",
        ),
    ] {
        let mut conn = TcpStream::connect(addr_of(&server)).await.expect("connect");
        let answer = raw_exchange(&mut conn, request.as_bytes()).await;
        let (head, body) = answer.split_once("\r\n\r\n").expect("a whole answer");
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
        assert!(
            head.contains("content-type: application/problem+json"),
            "{head}"
        );
        let problem: serde_json::Value = serde_json::from_str(body).expect("problem JSON");
        assert_eq!(
            (problem["status"].as_u64(), problem["type"].as_str()),
            (Some(status), Some(kind))
        );
    }
    // The same connection pool goes on working: nothing above closed the server's side.
    assert_eq!(server.get("/healthz").await.status(), 200);
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn with_1100_idle_sockets_and_1024_descriptors_healthz_still_answers() {
    limits_support::descriptor_flood_scenario().await;
}

#[tokio::test]
async fn with_the_database_down_requests_are_503_within_3_seconds() {
    limits_support::database_down_scenario().await;
}

#[tokio::test]
async fn a_request_past_its_time_limit_is_503_timeout() {
    limits_support::request_timeout_scenario().await;
}

#[tokio::test]
async fn the_rate_counts_per_api_key_not_per_address() {
    limits_support::per_key_rate_scenario().await;
}
