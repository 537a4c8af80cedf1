//! Opening the Postgres store: the pool, the `LISTEN`ing connection and the background tasks
//! that carry hints between replicas.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use sqlx::postgres::PgPoolOptions;
use tokio::sync::broadcast;

use super::{DEFAULT_COMMIT_WRITERS, PgStore, StoreError, WAKEUP_CAPACITY, group, notify, outbox};

/// How long an operation of [`PgStore::connect`]'s pool waits for a connection before failing
/// instead of hanging. `cairn serve` sets its own (`db_acquire_timeout_ms`, 2 s by default,
/// through [`PgStore::connect_with`]): with the database down, the API answers 503 after it.
const ACQUIRE_TIMEOUT: StdDuration = StdDuration::from_secs(10);

/// The pool's size and how long an operation waits for one of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    pub max_connections: u32,
    pub acquire_timeout: StdDuration,
    /// Group-commit writers ([`group`]); at least one.
    pub commit_writers: usize,
}

impl PgStore {
    /// Connects (and does not migrate) a pool of up to `max_connections` to `url`, plus one
    /// dedicated connection that `LISTEN`s for wake-ups. The listener is subscribed before this
    /// returns, so a hint committed afterwards by any replica reaches [`Store::subscribe`].
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = PoolOptions {
            max_connections,
            acquire_timeout: ACQUIRE_TIMEOUT,
            commit_writers: DEFAULT_COMMIT_WRITERS,
        };
        Self::connect_with(url, options).await
    }

    /// [`PgStore::connect`] with the pool's acquire timeout given.
    pub async fn connect_with(url: &str, options: PoolOptions) -> Result<Self, StoreError> {
        // No ping before handing out an idle connection: it would cost a round trip per
        // statement, and a dead connection fails its statement anyway (a transient error the
        // callers retry), after which sqlx drops it. sqlx still pings once on return.
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(false)
            .connect(url)
            .await?;
        // Marks this store's hints, so its own listener does not deliver them a second time.
        let origin = format!("{:016x}", fastrand::u64(..));
        let listener = notify::listen(url, &origin).await?;
        let (wakeups, _) = broadcast::channel(WAKEUP_CAPACITY);
        let hearing = notify::Hearing {
            url: url.to_string(),
            origin: origin.clone(),
            tx: wakeups.clone(),
        };
        let listening = notify::spawn(hearing, listener);
        let hints = Arc::new(outbox::Outbox::new(wakeups.clone(), origin));
        let sending = outbox::spawn(pool.clone(), hints.clone());
        let group = Arc::new(group::GroupCommit::start(
            pool.clone(),
            hints.clone(),
            options.commit_writers.max(1),
        ));
        let creations = Arc::new(group::GroupCommit::start(pool.clone(), hints.clone(), 1));
        Ok(Self {
            pool,
            wakeups,
            hints,
            group,
            creations,
            _background: Arc::new((listening, sending)),
        })
    }
}
