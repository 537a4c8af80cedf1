//! Sending wake-up hints: at once to this process, after commit and coalesced to the others.
//!
//! A hint is delivered to this store's own subscribers (its workers, its SSE streams) the
//! moment the write that implies it has committed, through the in-process channel: no round
//! trip through the database stands between a commit and the stream that shows it. Other
//! replicas hear it through `NOTIFY`, sent by one background task per store, and only while
//! another replica is listening: every store's listening connection names itself
//! `cairn-hints/<origin>` (`application_name`), and the sender looks every [`PEER_CHECK`] for
//! a listener of another origin on the same database. A single `cairn serve` therefore sends
//! no `NOTIFY` at all. Hints recorded while no peer listens are kept until the next look and
//! dropped only if it still finds none, so a hint recorded after a new replica started
//! listening reaches it (at most one look late); each payload carries its origin, and a
//! listener drops its own store's hints, which it already delivered.
//!
//! Why not `pg_notify` inside the committing transaction? Postgres holds a global lock on its
//! notification queue from the moment a notifying transaction starts to commit until its commit
//! record is flushed, so every notifying commit waits for the previous one's WAL flush: group
//! commit is lost. Measured on this machine with pgbench, 8 clients: plain inserts 2,287 tps,
//! the same inserts with an in-transaction NOTIFY 278 tps; through this store, 8 workers
//! committing one event each went from 235 to 437 events/s (debug build, busy machine), the
//! ceiling now being the fsync rather than the lock. Hints are allowed to be lost
//! (readers re-read after the last `seq` they saw), so they do not need the transaction's
//! atomicity: writers record a hint here after their commit returns, and this task sends all
//! pending hints in one statement whose transaction writes no WAL. A hint is therefore never
//! seen before its rows are visible; a crash between commit and send loses it, like any hint.
//!
//! Coalescing keeps the pending set bounded by the number of distinct tasks: only the highest
//! `last_seq` per task matters, and one "a task is runnable" hint stands for any number.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::{Notify, broadcast};
use tokio::task::JoinHandle;

use super::notify::{EVENTS_CHANNEL, TASKS_CHANNEL, listener_name};
use crate::domain::task::TaskId;
use crate::store::Wakeup;

/// How often the sender looks for listeners of other replicas.
pub(super) const PEER_CHECK: Duration = Duration::from_millis(500);

/// What the hint sender did so far, for benchmarks and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HintStats {
    /// Looks for other replicas' listeners finished.
    pub looks: u64,
    /// `NOTIFY` statements sent (each carrying any number of hints).
    pub notify_statements: u64,
}

#[derive(Debug, Default)]
struct Pending {
    events: HashMap<TaskId, i64>,
    runnable: bool,
}

/// Hints recorded by writers and not yet sent to the other replicas.
#[derive(Debug)]
pub(super) struct Outbox {
    pending: Mutex<Pending>,
    ready: Notify,
    /// This store's own subscribers.
    local: broadcast::Sender<Wakeup>,
    /// This store's mark on its payloads and its listener's name.
    origin: String,
    /// Whether another replica listened at the last look (assumed until the first one).
    peers: AtomicBool,
    looks: AtomicU64,
    notify_statements: AtomicU64,
}

impl Outbox {
    pub(super) fn new(local: broadcast::Sender<Wakeup>, origin: String) -> Outbox {
        Outbox {
            pending: Mutex::default(),
            ready: Notify::new(),
            local,
            origin,
            peers: AtomicBool::new(true),
            looks: AtomicU64::new(0),
            notify_statements: AtomicU64::new(0),
        }
    }

    pub(super) fn stats(&self) -> HintStats {
        HintStats {
            looks: self.looks.load(Ordering::Relaxed),
            notify_statements: self.notify_statements.load(Ordering::Relaxed),
        }
    }

    /// Delivers each hint a committed write implies (see `crate::store::rules`) to this
    /// store's subscribers at once, and records it for the other replicas.
    pub(super) fn publish(&self, wakeups: Vec<Wakeup>) {
        for wakeup in &wakeups {
            // No receivers is normal (nobody follows this task).
            let _ = self.local.send(wakeup.clone());
        }
        self.with_pending(|pending| {
            for wakeup in wakeups {
                match wakeup {
                    Wakeup::Events { task_id, last_seq } => {
                        let seq = pending.events.entry(task_id).or_insert(last_seq);
                        *seq = (*seq).max(last_seq);
                    }
                    Wakeup::TaskRunnable => pending.runnable = true,
                    // In process only (the other replicas' workers look at each heartbeat).
                    Wakeup::Message { .. } => {}
                }
            }
        });
        if self.peers.load(Ordering::Relaxed) {
            // Stores a permit if the sender is busy, so no hint waits for the next one.
            self.ready.notify_one();
        }
    }

    fn with_pending(&self, change: impl FnOnce(&mut Pending)) {
        // A poisoned lock only means another writer panicked mid-insert; the map is still valid.
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut pending);
    }

    /// Everything pending, as `(channel, payload)` columns; empties the outbox.
    fn take(&self) -> (Vec<&'static str>, Vec<String>) {
        let pending = std::mem::take(
            &mut *self
                .pending
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let mut channels = Vec::with_capacity(pending.events.len() + 1);
        let mut payloads = Vec::with_capacity(pending.events.len() + 1);
        for (task_id, last_seq) in pending.events {
            channels.push(EVENTS_CHANNEL);
            payloads.push(format!("{task_id}:{last_seq}@{}", self.origin));
        }
        if pending.runnable {
            channels.push(TASKS_CHANNEL);
            payloads.push(format!("@{}", self.origin));
        }
        (channels, payloads)
    }
}

/// Stops the sender when the last handle to the store goes away.
#[derive(Debug)]
pub(super) struct SenderTask(JoinHandle<()>);

impl Drop for SenderTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(super) fn spawn(pool: PgPool, outbox: Arc<Outbox>) -> SenderTask {
    SenderTask(tokio::spawn(send(pool, outbox)))
}

/// While one batch is in flight the next accumulates, so the batch size follows the load.
async fn send(pool: PgPool, outbox: Arc<Outbox>) {
    let mut look = tokio::time::interval(PEER_CHECK);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = outbox.ready.notified() => {
                if outbox.peers.load(Ordering::Relaxed) {
                    notify(&pool, &outbox, outbox.take()).await;
                }
            }
            _ = look.tick() => look_for_peers(&pool, &outbox).await,
        }
    }
}

/// Sends what was pending before the look if another replica listens, drops it if none does;
/// hints recorded during the look wait for the next one.
async fn look_for_peers(pool: &PgPool, outbox: &Outbox) {
    let before = outbox.take();
    let peers = sqlx::query_scalar::<_, bool>(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() \
         AND application_name LIKE 'cairn-hints/%' AND application_name <> $1)",
    )
    .bind(listener_name(&outbox.origin))
    .fetch_one(pool)
    .await
    .unwrap_or_else(|error| {
        tracing::debug!(%error, "cannot look for other replicas; sending hints to be safe");
        true
    });
    outbox.peers.store(peers, Ordering::Relaxed);
    if peers {
        notify(pool, outbox, before).await;
        // Anything recorded during the look goes out with the next batch, not the next look.
        outbox.ready.notify_one();
    }
    outbox.looks.fetch_add(1, Ordering::Relaxed);
}

async fn notify(
    pool: &PgPool,
    outbox: &Outbox,
    (channels, payloads): (Vec<&'static str>, Vec<String>),
) {
    if channels.is_empty() {
        return;
    }
    outbox.notify_statements.fetch_add(1, Ordering::Relaxed);
    let sent = sqlx::query(
        "SELECT pg_notify(n.channel, n.payload)::text \
         FROM UNNEST($1::text[], $2::text[]) AS n(channel, payload)",
    )
    .bind(channels)
    .bind(payloads)
    .execute(pool)
    .await;
    if let Err(error) = sent {
        tracing::warn!(%error, "wake-up hints not sent; readers fall back to polling");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_to_the_highest_seq_per_task_and_one_runnable() {
        let (local, mut heard) = broadcast::channel(16);
        let outbox = Outbox::new(local, "o1".into());
        let (a, b) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
        let events = |task_id, last_seq| Wakeup::Events { task_id, last_seq };
        outbox.publish(vec![events(a, 3), events(a, 5)]);
        outbox.publish(vec![events(a, 4), events(b, 1), Wakeup::TaskRunnable]);
        outbox.publish(vec![Wakeup::TaskRunnable]);
        let (channels, payloads) = outbox.take();
        let mut sent: Vec<(&str, String)> = channels.into_iter().zip(payloads).collect();
        sent.sort();
        let mut want = vec![
            (EVENTS_CHANNEL, format!("{a}:5@o1")),
            (EVENTS_CHANNEL, format!("{b}:1@o1")),
            (TASKS_CHANNEL, "@o1".to_string()),
        ];
        want.sort();
        assert_eq!(sent, want);
        assert_eq!(outbox.take(), (Vec::new(), Vec::new()), "taking empties it");
        // Every hint reached this store's own subscribers at once, uncoalesced and in order.
        let mut local = Vec::new();
        while let Ok(wakeup) = heard.try_recv() {
            local.push(wakeup);
        }
        assert_eq!(local.len(), 6);
        assert_eq!(local[0], events(a, 3));
        assert_eq!(local[5], Wakeup::TaskRunnable);
    }
}
