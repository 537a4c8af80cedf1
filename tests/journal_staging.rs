//! The journal's staged transitions (fewer transactions, same events): a staged transition is
//! in memory at once and in the store only with the next commit, which carries every staged
//! transition before its own, in order, with the seqs handed out when they were staged; a
//! flush commits them; a failed transition (its mutation or its commit) closes the journal, so
//! nothing is written from a state the store does not hold. On a temp-file SQLite store
//! behind the `Store` trait (the journal does not know the backend).
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::sync::Arc;

use cairn::clock::{Clock, SystemClock};
use cairn::domain::event::kinds;
use cairn::domain::task::{Budget, DEFAULT_TENANT, NewTask, Strategy};
use cairn::engine::runtime::checkpoint::{EngineKind, Record, TaskState};
use cairn::engine::runtime::journal::Journal;
use cairn::engine::{Applied, EngineError, Halt, RunContext, StopSignal};
use cairn::store::{ClaimParams, Store, StoreError};
use chrono::Duration;
use serde_json::json;
use tokio::sync::watch;

async fn journal(store: Arc<dyn Store>) -> (Journal, watch::Sender<StopSignal>) {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let new = NewTask {
        tools: None,
        id: uuid::Uuid::now_v7(),
        tenant_id: DEFAULT_TENANT.to_string(),
        goal: "staged transitions".to_string(),
        strategy: Strategy::V2,
        budget: Budget {
            tokens: 1_000,
            tool_calls: 10,
            wall_ms: 60_000,
            cost: None,
        },
        metadata: json!({}),
        approval: Default::default(),
    };
    store
        .create_task(new, None, clock.now())
        .await
        .expect("create");
    let claimed = store
        .claim(ClaimParams::new("w", clock.now(), Duration::seconds(30)))
        .await
        .expect("claim")
        .expect("the task");
    let (stop_tx, stop) = watch::channel(StopSignal::Run);
    let ctx = RunContext {
        task: claimed.task,
        lease: claimed.lease,
        state: claimed.state,
        store,
        clock,
        stop,
        inbox: cairn::engine::Inbox::new(),
        meters: cairn::meters::Meters::new(),
    };
    (Journal::new(ctx, TaskState::fresh(EngineKind::V2)), stop_tx)
}

/// `(kind, note)` of the task's events after the claim.
async fn stored(journal: &Journal) -> Vec<(i64, String, String)> {
    let ctx = journal.ctx();
    ctx.store
        .list_events(DEFAULT_TENANT, ctx.task.id, 2, 100)
        .await
        .expect("events")
        .into_iter()
        .map(|e| {
            let note = e.data["note"].as_str().unwrap_or_default().to_string();
            (e.seq, e.kind, note)
        })
        .collect()
}

/// The checkpoint in the store's file (one task in it).
async fn stored_checkpoint(path: &std::path::Path) -> TaskState {
    let file = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open the file");
    let state: String = sqlx::query_scalar("SELECT state FROM tasks")
        .fetch_one(&file)
        .await
        .expect("the checkpoint");
    serde_json::from_str(&state).expect("state")
}

fn step(note: &str, calls: u32) -> impl FnOnce(&mut TaskState) -> Result<(Record, ()), Halt> {
    let note = note.to_string();
    move |state: &mut TaskState| {
        state.strategic_calls = calls;
        Ok((
            Record::event(kinds::ENGINE_STEP, json!({ "note": note })),
            (),
        ))
    }
}

#[tokio::test]
async fn staged_transitions_commit_with_the_next_record_in_order() {
    let (file_guard, store) = common::sqlite_store().await;
    let (journal, _stop) = journal(store.clone()).await;

    let (first, ()) = journal.stage(step("a", 1)).await.expect("stage a");
    let (second, ()) = journal.stage(step("b", 2)).await.expect("stage b");
    assert_eq!(
        (first, second),
        (
            Applied {
                first_seq: 3,
                last_seq: 3
            },
            Applied {
                first_seq: 4,
                last_seq: 4
            }
        ),
        "the seqs staged transitions will get"
    );
    assert_eq!(journal.read(|s| s.strategic_calls).await, 2, "in memory");
    assert!(stored(&journal).await.is_empty(), "not yet in the store");

    let (third, ()) = journal.record(step("c", 3)).await.expect("record c");
    assert_eq!(
        third,
        Applied {
            first_seq: 5,
            last_seq: 5
        }
    );
    assert_eq!(
        stored(&journal).await,
        [(3, "a"), (4, "b"), (5, "c")]
            .map(|(seq, note)| (seq, kinds::ENGINE_STEP.to_string(), note.to_string()))
            .to_vec(),
        "one commit carried all three, in order, with the staged seqs"
    );
    // The checkpoint written with them is the state after all three (one task in the file).
    let checkpoint = stored_checkpoint(&file_guard.path).await;
    assert_eq!(checkpoint.strategic_calls, 3);
}

#[tokio::test]
async fn a_flush_commits_what_is_staged_and_nothing_else() {
    let (_file, store) = common::sqlite_store().await;
    let (journal, _stop) = journal(store.clone()).await;
    let id = journal.ctx().task.id;
    let before = store.get_task(DEFAULT_TENANT, id).await.unwrap().unwrap();
    journal.flush().await.expect("empty flush");
    let after = store.get_task(DEFAULT_TENANT, id).await.unwrap().unwrap();
    assert_eq!(
        after.updated_at, before.updated_at,
        "nothing staged, nothing written"
    );

    journal.stage(step("a", 1)).await.expect("stage");
    journal.flush().await.expect("flush");
    assert_eq!(
        stored(&journal).await,
        vec![(3, kinds::ENGINE_STEP.to_string(), "a".to_string())]
    );
}

#[tokio::test]
async fn a_refused_commit_closes_the_journal_and_nothing_more_is_written() {
    let (_file, store) = common::sqlite_store().await;
    let (journal, _stop) = journal(store.clone()).await;
    let id = journal.ctx().task.id;
    journal.stage(step("a", 1)).await.expect("stage");
    store
        .cancel_task(DEFAULT_TENANT, id, SystemClock.now())
        .await
        .expect("cancel");
    let refused = journal.record(step("b", 2)).await;
    assert!(matches!(refused, Err(Halt::LeaseLost)), "{refused:?}");
    // Every later transition and flush of the attempt gets the same outcome, unwritten.
    let staged = journal.stage(step("c", 3)).await;
    assert!(matches!(staged, Err(Halt::LeaseLost)), "{staged:?}");
    let flushed = journal.flush().await;
    assert!(matches!(flushed, Err(Halt::LeaseLost)), "{flushed:?}");
    let kinds_seen: Vec<String> = stored(&journal).await.into_iter().map(|e| e.1).collect();
    assert_eq!(
        kinds_seen,
        [kinds::TASK_CANCELLED],
        "nothing staged or refused was written"
    );
}

/// A mutation that changed the state and then failed: the change is in memory only, so the
/// journal refuses to commit anything after it, with an error as transient as the first.
async fn half_a_transition_is_never_committed(first: EngineError, transient: bool) {
    let (file_guard, store) = common::sqlite_store().await;
    let (journal, _stop) = journal(store.clone()).await;
    journal.record(step("a", 1)).await.expect("record a");
    let failed = journal
        .record(move |state: &mut TaskState| -> Result<(Record, ()), Halt> {
            state.strategic_calls = 99;
            Err(Halt::Error(first))
        })
        .await;
    assert!(matches!(failed, Err(Halt::Error(_))), "{failed:?}");
    for refused in [
        journal.record(step("b", 2)).await,
        journal.stage(step("c", 3)).await,
        journal.flush().await.map(|()| (applied0(), ())),
    ] {
        match refused {
            Err(Halt::Error(error @ EngineError::Closed { .. })) => {
                assert_eq!(error.is_transient(), transient, "{error}");
            }
            other => panic!("expected the closed journal's error, got {other:?}"),
        }
    }
    assert_eq!(
        stored(&journal).await,
        vec![(3, kinds::ENGINE_STEP.to_string(), "a".to_string())],
        "only what was committed before the failure"
    );
    let checkpoint = stored_checkpoint(&file_guard.path).await;
    assert_eq!(
        checkpoint.strategic_calls, 1,
        "the checkpoint of the last commit"
    );
}

fn applied0() -> Applied {
    Applied {
        first_seq: 0,
        last_seq: 0,
    }
}

#[tokio::test]
async fn a_failed_mutation_closes_the_journal() {
    half_a_transition_is_never_committed(EngineError::Other("invariant broken".into()), false)
        .await;
}

#[tokio::test]
async fn after_a_transient_store_fault_the_closed_journal_stays_transient() {
    let fault = EngineError::Store(StoreError::Database(sqlx::Error::PoolTimedOut));
    half_a_transition_is_never_committed(fault, true).await;
}
