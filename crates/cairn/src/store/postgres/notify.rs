//! Receiving wake-up hints: one `LISTEN`ing connection per store, on both channels.
//!
//! Every replica's writes are announced with `NOTIFY` once committed ([`super::outbox`]). A
//! background task owns a [`PgListener`] and forwards parsed hints to a broadcast channel,
//! except the store's own (their payload names its origin), which the outbox delivered in
//! process already. The connection is named `cairn-hints/<origin>` so that other replicas'
//! outboxes can see that someone listens.
//! Hints can be lost (a dropped connection, a lagging receiver); readers re-read rows after the
//! last `seq` they saw, and after every reconnect the listener emits [`Wakeup::TaskRunnable`]
//! so idle workers poll once for anything missed while it was deaf.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgNotification, PgPoolOptions};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::store::{StoreError, Wakeup};

/// Payload `<task_id>:<last_seq>@<origin>`: events up to `last_seq` were committed for the task.
pub(super) const EVENTS_CHANNEL: &str = "cairn_events";
/// Payload `@<origin>`: a task became claimable.
pub(super) const TASKS_CHANNEL: &str = "cairn_tasks";

/// The `application_name` of the listening connection of the store marked `origin`.
pub(super) fn listener_name(origin: &str) -> String {
    format!("cairn-hints/{origin}")
}

const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Turns a notification into a hint and the origin it names (none from a version that did not
/// mark them); `None` for anything this version does not understand.
pub(super) fn parse<'a>(channel: &str, payload: &'a str) -> Option<(Wakeup, Option<&'a str>)> {
    let (payload, origin) = match payload.rsplit_once('@') {
        Some((payload, origin)) => (payload, Some(origin)),
        None => (payload, None),
    };
    let wakeup = match channel {
        TASKS_CHANNEL => Some(Wakeup::TaskRunnable),
        EVENTS_CHANNEL => {
            let (task_id, last_seq) = payload.split_once(':')?;
            Some(Wakeup::Events {
                task_id: task_id.parse().ok()?,
                last_seq: last_seq.parse().ok()?,
            })
        }
        _ => None,
    }?;
    Some((wakeup, origin))
}

/// Connects a listener named for `origin` and subscribes it to both channels.
pub(super) async fn listen(url: &str, origin: &str) -> Result<PgListener, StoreError> {
    let options = url
        .parse::<PgConnectOptions>()?
        .application_name(&listener_name(origin));
    // A pool of one without timeouts, as `PgListener::connect` makes: it only reconnects.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_with(options)
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.ignore_pool_close_event(true);
    listener.listen_all([EVENTS_CHANNEL, TASKS_CHANNEL]).await?;
    Ok(listener)
}

/// Aborts the listener task when the last handle to the store goes away.
#[derive(Debug)]
pub(super) struct ListenerTask(JoinHandle<()>);

impl Drop for ListenerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Spawns the task that forwards notifications from `listener` (already listening) to `tx`,
/// reconnecting with capped exponential backoff whenever the connection fails.
pub(super) fn spawn(hearing: Hearing, listener: PgListener) -> ListenerTask {
    ListenerTask(tokio::spawn(run(hearing, listener)))
}

/// What the listener task needs besides its first connection.
pub(super) struct Hearing {
    pub url: String,
    /// This store's origin: its own hints are not forwarded twice.
    pub origin: String,
    pub tx: broadcast::Sender<Wakeup>,
}

async fn run(hearing: Hearing, first: PgListener) {
    let Hearing { url, origin, tx } = &hearing;
    let mut listener = Some(first);
    let mut backoff = BACKOFF_START;
    loop {
        let mut current = match listener.take() {
            Some(current) => current,
            None => match listen(url, origin).await {
                Ok(fresh) => {
                    tracing::info!("postgres listener reconnected");
                    backoff = BACKOFF_START;
                    // Hints sent while we were disconnected are gone: tell idle workers to poll.
                    let _ = tx.send(Wakeup::TaskRunnable);
                    fresh
                }
                Err(error) => {
                    tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "postgres listener cannot connect");
                    tokio::time::sleep(jittered(backoff)).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            },
        };
        match forward(&mut current, tx, origin).await {
            // The connection dropped but the listener is still usable: sqlx re-listens on the
            // next receive. Hints may have been missed in between.
            Ok(()) => {
                tracing::warn!("postgres listener connection lost; re-listening");
                let _ = tx.send(Wakeup::TaskRunnable);
                listener = Some(current);
            }
            Err(error) => {
                tracing::warn!(%error, "postgres listener failed; reconnecting");
                tokio::time::sleep(jittered(backoff)).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Forwards notifications until the connection is lost (`Ok`) or fails (`Err`).
async fn forward(
    listener: &mut PgListener,
    tx: &broadcast::Sender<Wakeup>,
    origin: &str,
) -> Result<(), sqlx::Error> {
    while let Some(notification) = listener.try_recv().await? {
        publish(&notification, tx, origin);
    }
    Ok(())
}

fn publish(notification: &PgNotification, tx: &broadcast::Sender<Wakeup>, own: &str) {
    match parse(notification.channel(), notification.payload()) {
        // Delivered in process when it was recorded.
        Some((_, Some(origin))) if origin == own => {}
        // No receivers is normal (nobody follows this task); nothing to do.
        Some((wakeup, _)) => {
            let _ = tx.send(wakeup);
        }
        None => tracing::warn!(
            channel = notification.channel(),
            payload = notification.payload(),
            "ignoring an unparseable notification"
        ),
    }
}

/// Spreads reconnect attempts of many replicas after a database restart.
fn jittered(base: Duration) -> Duration {
    let jitter = fastrand::u64(0..=base.as_millis() as u64 / 2);
    base + Duration::from_millis(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_event_hints() {
        let id = uuid::Uuid::now_v7();
        let events = Wakeup::Events {
            task_id: id,
            last_seq: 42,
        };
        let marked = format!("{id}:42@0123abcd");
        assert_eq!(
            parse(EVENTS_CHANNEL, &marked),
            Some((events.clone(), Some("0123abcd")))
        );
        assert_eq!(
            parse(TASKS_CHANNEL, "@0123abcd"),
            Some((Wakeup::TaskRunnable, Some("0123abcd")))
        );
        // An earlier version's unmarked hints are still understood.
        assert_eq!(
            parse(EVENTS_CHANNEL, &format!("{id}:42")),
            Some((events, None))
        );
        assert_eq!(parse(TASKS_CHANNEL, ""), Some((Wakeup::TaskRunnable, None)));
    }

    #[test]
    fn rejects_malformed_hints() {
        assert_eq!(parse(EVENTS_CHANNEL, "not-a-uuid:1"), None);
        assert_eq!(parse(EVENTS_CHANNEL, "no-separator"), None);
        let id = uuid::Uuid::now_v7();
        assert_eq!(parse(EVENTS_CHANNEL, &format!("{id}:x")), None);
        assert_eq!(parse(EVENTS_CHANNEL, &format!("{id}:x@o")), None);
        assert_eq!(parse("other", ""), None);
    }
}
