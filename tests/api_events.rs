//! The events endpoint over a real server: replay after `Last-Event-ID` or `?after`, live
//! follow of events committed through the store's fenced writes, the terminal event closing
//! the stream, keep-alive comments, the JSON page, shutdown, and (on Postgres) an event
//! committed through one replica arriving on a stream served by another.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod api_support;
mod common;

use api_support::{Db, Frame, SseReader, TestServer, WAIT, append, claim, header, test_config};
use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::{Lease, Task, TaskStatus};
use cairn::store::Store;
use serde_json::{Value, json};

fn step(n: i64) -> NewEvent {
    NewEvent::new(kinds::ENGINE_STEP, json!({ "n": n }))
}

/// A task with events 1 (created), 2 (claimed), 3..=5 (steps), still running.
async fn task_with_five_events(server: &TestServer, store: &dyn Store) -> (Task, Lease) {
    let task = server.create_task("stream me").await;
    let lease = claim(store, &task).await;
    let last = append(store, &lease, vec![step(1), step(2), step(3)], None).await;
    assert_eq!(last, 5);
    (task, lease)
}

async fn expect_events(reader: &mut SseReader, seqs: std::ops::RangeInclusive<i64>) {
    for seq in seqs {
        let (id, kind, data) = reader.next_event().await.expect("an event");
        assert_eq!(id, seq.to_string(), "ids are consecutive seqs");
        assert_eq!(data["seq"], seq, "{data}");
        assert_eq!(data["kind"], kind.as_str(), "event: is the kind");
        assert!(data["task_id"].is_string() && data["created_at"].is_string());
    }
}

#[tokio::test]
async fn replay_from_the_start_after_last_event_id_and_after_param() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let (task, _lease) = task_with_five_events(&server, store.as_ref()).await;
    let path = format!("/v1/tasks/{}/events", task.id);

    let mut all = server.events(&path, None).await;
    let (_, kind, _) = all.next_event().await.expect("first");
    assert_eq!(kind, kinds::TASK_CREATED);
    let (_, kind, _) = all.next_event().await.expect("second");
    assert_eq!(kind, kinds::TASK_CLAIMED);
    expect_events(&mut all, 3..=5).await;

    let mut resumed = server.events(&path, Some("3")).await;
    expect_events(&mut resumed, 4..=5).await;

    let mut from_param = server.events(&format!("{path}?after=4"), None).await;
    expect_events(&mut from_param, 5..=5).await;

    // The header wins: EventSource sends it on reconnect while the URL keeps `after`.
    let mut both = server.events(&format!("{path}?after=1"), Some("2")).await;
    expect_events(&mut both, 3..=5).await;

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn live_events_arrive_and_the_terminal_event_ends_the_stream() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let (task, lease) = task_with_five_events(&server, store.as_ref()).await;
    let path = format!("/v1/tasks/{}/events", task.id);

    let mut reader = server.events(&path, Some("5")).await;
    // Nothing to replay; these arrive live, one commit at a time and then a batch.
    append(store.as_ref(), &lease, vec![step(4)], None).await;
    expect_events(&mut reader, 6..=6).await;
    append(store.as_ref(), &lease, vec![step(5), step(6)], None).await;
    expect_events(&mut reader, 7..=8).await;

    let terminal = append(
        store.as_ref(),
        &lease,
        vec![NewEvent::new(
            kinds::TASK_SUCCEEDED,
            json!({"report": "done"}),
        )],
        Some(TaskStatus::Succeeded),
    )
    .await;
    let (id, kind, data) = reader.next_event().await.expect("terminal event");
    assert_eq!(
        (id, kind.as_str()),
        (terminal.to_string(), kinds::TASK_SUCCEEDED)
    );
    assert_eq!(data["data"], json!({"report": "done"}));
    assert_eq!(
        reader.next_event().await,
        None,
        "the stream ends after the terminal event"
    );

    // Reconnecting after the end: 204 tells EventSource to stop.
    let again = server
        .client
        .get(server.url(&path))
        .header("last-event-id", terminal.to_string())
        .send()
        .await
        .expect("reconnect");
    assert_eq!(again.status(), 204);

    // A late subscriber replays everything and also sees the end.
    let mut late = server.events(&path, None).await;
    let mut last = None;
    while let Some((id, kind, _)) = late.next_event().await {
        last = Some((id, kind));
    }
    assert_eq!(
        last,
        Some((terminal.to_string(), kinds::TASK_SUCCEEDED.to_string()))
    );

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn cancelling_through_the_api_ends_a_live_stream() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let task = server.create_task("to be cancelled").await;
    let path = format!("/v1/tasks/{}/events", task.id);
    let mut reader = server.events(&path, None).await;
    let (_, kind, _) = reader.next_event().await.expect("created");
    assert_eq!(kind, kinds::TASK_CREATED);

    let cancel = server
        .client
        .post(server.url(&format!("/v1/tasks/{}/cancel", task.id)))
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancel.status(), 200);
    let (_, kind, _) = reader.next_event().await.expect("cancelled");
    assert_eq!(kind, kinds::TASK_CANCELLED);
    assert_eq!(reader.next_event().await, None);

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn keep_alive_comments_flow_while_idle() {
    let db = Db::create().await;
    let store = db.store().await;
    let config = cairn::config::Config {
        sse_keepalive_ms: 100,
        ..test_config()
    };
    let server = TestServer::start(store.clone(), config).await;
    let task = server.create_task("idle").await;
    let mut reader = server
        .events(&format!("/v1/tasks/{}/events", task.id), None)
        .await;
    let (_, kind, _) = reader.next_event().await.expect("created");
    assert_eq!(kind, kinds::TASK_CREATED);
    let mut comments = 0;
    while comments < 3 {
        match reader.next_frame().await.expect("stream stays open") {
            Frame::Comment(text) => {
                assert_eq!(text, "keep-alive");
                comments += 1;
            }
            other => panic!("unexpected frame while idle: {other:?}"),
        }
    }
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn json_pages_for_polling_clients() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let (task, lease) = task_with_five_events(&server, store.as_ref()).await;
    let page = |after: i64, limit: i64| {
        server
            .client
            .get(server.url(&format!(
                "/v1/tasks/{}/events?after={after}&limit={limit}",
                task.id
            )))
            .header("accept", "application/json")
            .send()
    };

    let first = page(0, 2).await.expect("page");
    assert_eq!(first.status(), 200);
    assert!(header(&first, "content-type").starts_with("application/json"));
    let first: Value = first.json().await.expect("json");
    let seqs: Vec<i64> = first["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|event| event["seq"].as_i64().expect("seq"))
        .collect();
    assert_eq!(seqs, [1, 2]);
    assert_eq!(first["next_after"], 2);
    assert_eq!(first["terminal"], false);

    let rest: Value = page(2, 50).await.expect("page").json().await.expect("json");
    assert_eq!(rest["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        (rest["next_after"].clone(), rest["terminal"].clone()),
        (json!(5), json!(false))
    );

    let idle: Value = page(5, 50).await.expect("page").json().await.expect("json");
    assert_eq!(idle["items"], json!([]));
    assert_eq!(
        (idle["next_after"].clone(), idle["terminal"].clone()),
        (json!(5), json!(false))
    );

    append(
        store.as_ref(),
        &lease,
        vec![NewEvent::new(kinds::TASK_FAILED, json!({}))],
        Some(TaskStatus::Failed),
    )
    .await;
    let end: Value = page(5, 50).await.expect("page").json().await.expect("json");
    assert_eq!(end["items"][0]["kind"], kinds::TASK_FAILED);
    assert_eq!(end["terminal"], true);
    let after_end: Value = page(6, 50).await.expect("page").json().await.expect("json");
    assert_eq!(after_end["items"], json!([]));
    assert_eq!(
        after_end["terminal"], true,
        "still terminal when polled past the end"
    );

    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn shutdown_ends_live_streams() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let task = server.create_task("open during shutdown").await;
    let mut reader = server
        .events(&format!("/v1/tasks/{}/events", task.id), None)
        .await;
    reader.next_event().await.expect("created");
    // `shutdown` fails unless serve returns in time, which needs the stream to end.
    let stopping = tokio::spawn(server.shutdown());
    assert_eq!(reader.next_event().await, None);
    tokio::time::timeout(WAIT, stopping)
        .await
        .expect("shutdown in time")
        .expect("shutdown task");
    db.drop().await;
}

/// Two routers on two `PgStore`s over one database stand in for two `cairn serve` replicas:
/// an event committed through replica A reaches a stream served by replica B.
#[tokio::test]
async fn an_event_committed_on_one_replica_reaches_a_stream_on_another() {
    let db = common::TestPg::create().await;
    let connect = || async {
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(
            cairn::store::postgres::PgStore::connect(&db.url, 4)
                .await
                .expect("connect"),
        );
        store
    };
    let store_a = connect().await;
    store_a.migrate().await.expect("migrate");
    let store_b = connect().await;
    // Slow polling on B: the event must come through the cross-replica wake-up, not the tick.
    let config_b = cairn::config::Config {
        poll_interval_ms: 60_000,
        ..test_config()
    };
    let replica_a = TestServer::start(store_a.clone(), test_config()).await;
    let replica_b = TestServer::start(store_b, config_b).await;

    let task = replica_a.create_task("cross replica").await;
    let mut on_b = replica_b
        .events(&format!("/v1/tasks/{}/events", task.id), None)
        .await;
    let (_, kind, _) = on_b.next_event().await.expect("created, replayed on B");
    assert_eq!(kind, kinds::TASK_CREATED);

    let lease = claim(store_a.as_ref(), &task).await;
    let started = std::time::Instant::now();
    let seq = append(store_a.as_ref(), &lease, vec![step(1)], None).await;
    // The claim (seq 2) and the step (seq 3) arrive on B, in order.
    let (id, kind, _) = on_b.next_event().await.expect("claimed on B");
    assert_eq!((id.as_str(), kind.as_str()), ("2", kinds::TASK_CLAIMED));
    let (id, kind, _) = on_b.next_event().await.expect("step on B");
    assert_eq!((id, kind.as_str()), (seq.to_string(), kinds::ENGINE_STEP));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "delivered by the wake-up, well before B's 60 s poll"
    );

    // A terminal event on A ends B's stream.
    append(
        store_a.as_ref(),
        &lease,
        vec![NewEvent::new(kinds::TASK_SUCCEEDED, json!({}))],
        Some(TaskStatus::Succeeded),
    )
    .await;
    let (_, kind, _) = on_b.next_event().await.expect("terminal on B");
    assert_eq!(kind, kinds::TASK_SUCCEEDED);
    assert_eq!(on_b.next_event().await, None);

    replica_a.shutdown().await;
    replica_b.shutdown().await;
    db.drop_database().await;
}

/// Hints can be lost; rows cannot. Two SQLite stores on one file share no in-process hints, so an
/// event committed through one reaches a stream served over the other only by the poll tick.
#[tokio::test]
async fn the_poll_tick_delivers_events_without_any_wake_up() {
    let db = common::TestSqlite::create();
    let open = || async {
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(
            cairn::store::sqlite::SqliteStore::open(&db.path)
                .await
                .expect("open sqlite"),
        );
        store
    };
    let writer = open().await;
    writer.migrate().await.expect("migrate");
    let reader_store = open().await;
    let server = TestServer::start(reader_store, test_config()).await;
    let task = server.create_task("no hints").await;
    let mut reader = server
        .events(&format!("/v1/tasks/{}/events", task.id), None)
        .await;
    reader.next_event().await.expect("created");

    let lease = claim(writer.as_ref(), &task).await;
    append(writer.as_ref(), &lease, vec![step(1)], None).await;
    let (id, kind, _) = reader.next_event().await.expect("claimed, by polling");
    assert_eq!((id.as_str(), kind.as_str()), ("2", kinds::TASK_CLAIMED));
    let (id, kind, _) = reader.next_event().await.expect("step, by polling");
    assert_eq!((id.as_str(), kind.as_str()), ("3", kinds::ENGINE_STEP));

    server.shutdown().await;
}
