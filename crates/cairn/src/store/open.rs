//! Which store a process opens: Postgres when a database URL is set, else the embedded SQLite
//! file.

use super::{Store, StoreError, postgres, sqlite};

/// Where the store lives (the configuration composes it).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSettings {
    /// `postgres://...` to run on Postgres; `None` runs on the embedded SQLite file.
    pub database_url: Option<crate::secret::Secret>,
    /// The SQLite file used when no `database_url` is set.
    pub sqlite_path: std::path::PathBuf,
    /// Postgres connection pool size.
    pub max_connections: u32,
    /// How long an operation waits for a pooled Postgres connection before it fails with a
    /// transient error (which the API answers 503).
    pub acquire_timeout_ms: u64,
    /// Postgres group-commit writers.
    pub commit_writers: usize,
}

/// Opens the store the settings ask for: Postgres when `database_url` is set, else the
/// embedded SQLite file. Does not migrate.
pub async fn open(settings: &StoreSettings) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    Ok(match &settings.database_url {
        Some(url) => std::sync::Arc::new(
            postgres::PgStore::connect_with(
                url.expose(),
                postgres::PoolOptions {
                    max_connections: settings.max_connections,
                    acquire_timeout: std::time::Duration::from_millis(settings.acquire_timeout_ms),
                    commit_writers: settings.commit_writers,
                },
            )
            .await?,
        ),
        None => std::sync::Arc::new(sqlite::SqliteStore::open(&settings.sqlite_path).await?),
    })
}
