//! The Store conformance suite: one set of cases, run against every backend.
//!
//! Each case is an async function taking `Arc<dyn Store>` and knowing nothing of the backend;
//! `conformance!` instantiates it as `sqlite_<case>` (a temp-file database) and
//! `postgres_<case>` (a fresh database on the local Postgres, dropped afterwards, even when the
//! case fails). Cases that need time to pass drive a `ManualClock`; nothing here sleeps to decide
//! an outcome. The cases live in `store_conformance/`, grouped by concern; `sqlite_file` adds the
//! few checks only the embedded file has (creation, WAL, reopen, two stores on one file).
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

#[path = "store_conformance/approvals.rs"]
mod approvals;
#[path = "store_conformance/keys.rs"]
mod keys;
#[path = "store_conformance/leases.rs"]
mod leases;
#[path = "store_conformance/nodes.rs"]
mod nodes;
#[path = "store_conformance/quota.rs"]
mod quota;
#[path = "store_conformance/records.rs"]
mod records;
#[path = "store_conformance/spend.rs"]
mod spend;
#[path = "store_conformance/sqlite_file.rs"]
mod sqlite_file;
#[path = "store_conformance/support.rs"]
mod support;
#[path = "store_conformance/tasks.rs"]
mod tasks;

use std::future::Future;
use std::sync::Arc;

use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;

/// Whatever must outlive the store: the temp dir, or the database to drop.
enum Guard {
    Sqlite(common::TestSqlite),
    Postgres(common::TestPg),
}

async fn sqlite_store() -> (Arc<dyn Store>, Guard) {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open sqlite");
    (Arc::new(store), Guard::Sqlite(db))
}

async fn postgres_store() -> (Arc<dyn Store>, Guard) {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 8)
        .await
        .expect("connect postgres");
    (Arc::new(store), Guard::Postgres(db))
}

/// Migrates (twice: migrations must be idempotent), runs the case in its own task so that a
/// failing assertion still reaches the clean-up, then re-raises the failure.
async fn run<Open, Opened, Case, Fut>(open: Open, case: Case)
where
    Open: FnOnce() -> Opened,
    Opened: Future<Output = (Arc<dyn Store>, Guard)>,
    Case: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (store, guard) = open().await;
    let outcome = async {
        store.migrate().await.expect("migrate");
        store.migrate().await.expect("migrate again is a no-op");
        store.ping().await.expect("ping");
        tokio::spawn(case(store)).await
    }
    .await;
    match guard {
        Guard::Sqlite(dir) => drop(dir),
        Guard::Postgres(db) => db.drop_database().await,
    }
    if let Err(err) = outcome {
        std::panic::resume_unwind(err.into_panic());
    }
}

/// `case => sqlite_name, postgres_name;` — every case runs on both backends, under names that
/// `cargo test --test store_conformance sqlite_` (or `postgres_`) selects.
macro_rules! conformance {
    ($($case:path => $sqlite:ident, $postgres:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $sqlite() {
                run(sqlite_store, $case).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $postgres() {
                run(postgres_store, $case).await;
            }
        )*
    };
}

conformance! {
    tasks::create_get_list_paginates => sqlite_create_get_list_paginates, postgres_create_get_list_paginates;
    tasks::idempotent_create => sqlite_idempotent_create, postgres_idempotent_create;
    tasks::events_are_dense_and_ordered => sqlite_events_are_dense_and_ordered, postgres_events_are_dense_and_ordered;
    tasks::cancel_queued => sqlite_cancel_queued, postgres_cancel_queued;
    tasks::cancel_running_revokes_lease => sqlite_cancel_running_revokes_lease, postgres_cancel_running_revokes_lease;
    tasks::cancel_terminal_or_unknown => sqlite_cancel_terminal_or_unknown, postgres_cancel_terminal_or_unknown;
    leases::claim_takes_oldest_with_lease => sqlite_claim_takes_oldest_with_lease, postgres_claim_takes_oldest_with_lease;
    leases::claim_race_never_double_claims => sqlite_claim_race_never_double_claims, postgres_claim_race_never_double_claims;
    leases::fenced_commit_refuses_stale_lease => sqlite_fenced_commit_refuses_stale_lease, postgres_fenced_commit_refuses_stale_lease;
    leases::terminal_commit_finishes_and_releases => sqlite_terminal_commit_finishes_and_releases, postgres_terminal_commit_finishes_and_releases;
    leases::release_requeues_with_checkpoint => sqlite_release_requeues_with_checkpoint, postgres_release_requeues_with_checkpoint;
    leases::heartbeat_extends_until_lost => sqlite_heartbeat_extends_until_lost, postgres_heartbeat_extends_until_lost;
    leases::lease_expiry_follows_the_clock => sqlite_lease_expiry_follows_the_clock, postgres_lease_expiry_follows_the_clock;
    quota::cap_is_respected => sqlite_cap_is_respected, postgres_cap_is_respected;
    quota::other_tenants_task_is_claimed_past_a_capped_tenant => sqlite_other_tenants_task_is_claimed_past_a_capped_tenant, postgres_other_tenants_task_is_claimed_past_a_capped_tenant;
    quota::ending_a_running_task_frees_its_slot => sqlite_ending_a_running_task_frees_its_slot, postgres_ending_a_running_task_frees_its_slot;
    quota::concurrent_capped_claims_stop_at_the_cap => sqlite_concurrent_capped_claims_stop_at_the_cap, postgres_concurrent_capped_claims_stop_at_the_cap;
    nodes::node_lock_is_exclusive_until_dropped => sqlite_node_lock_is_exclusive_until_dropped, postgres_node_lock_is_exclusive_until_dropped;
    nodes::reclaim_requeues_only_the_node_s_leases => sqlite_reclaim_requeues_only_the_node_s_leases, postgres_reclaim_requeues_only_the_node_s_leases;
    records::plan_versions_round_trip => sqlite_plan_versions_round_trip, postgres_plan_versions_round_trip;
    records::failed_commit_writes_nothing => sqlite_failed_commit_writes_nothing, postgres_failed_commit_writes_nothing;
    records::ledger_and_artifacts_round_trip => sqlite_ledger_and_artifacts_round_trip, postgres_ledger_and_artifacts_round_trip;
    records::receipts_keep_the_first => sqlite_receipts_keep_the_first, postgres_receipts_keep_the_first;
    records::subscribe_receives_wakeups => sqlite_subscribe_receives_wakeups, postgres_subscribe_receives_wakeups;
    approvals::a_parked_task_waits_without_a_lease_until_a_matching_decision => sqlite_a_parked_task_waits_without_a_lease_until_a_matching_decision, postgres_a_parked_task_waits_without_a_lease_until_a_matching_decision;
    approvals::an_expired_request_fails_its_task_with_a_report => sqlite_an_expired_request_fails_its_task_with_a_report, postgres_an_expired_request_fails_its_task_with_a_report;
    keys::keys_round_trip => sqlite_keys_round_trip, postgres_keys_round_trip;
    keys::stream_tokens_round_trip => sqlite_stream_tokens_round_trip, postgres_stream_tokens_round_trip;
    keys::reads_are_scoped_by_tenant => sqlite_reads_are_scoped_by_tenant, postgres_reads_are_scoped_by_tenant;
    spend::spend_is_kept_per_tenant_and_hour => sqlite_spend_is_kept_per_tenant_and_hour, postgres_spend_is_kept_per_tenant_and_hour;
    spend::claims_pass_over_capped_tenants_and_waiting_tasks => sqlite_claims_pass_over_capped_tenants_and_waiting_tasks, postgres_claims_pass_over_capped_tenants_and_waiting_tasks;
}
