//! The configuration composes each module's own settings type; these are the only places
//! that turn the whole [`Config`] into the part a module needs.

use super::Config;
use crate::http::HttpSettings;
use crate::store::StoreSettings;

impl Config {
    /// The HTTP layer's settings.
    pub fn http(&self) -> HttpSettings {
        HttpSettings {
            max_body_bytes: self.max_body_bytes,
            sse_keepalive_ms: self.sse_keepalive_ms,
            max_page_size: self.max_page_size,
            poll_interval_ms: self.poll_interval_ms,
            limits: self.http.clone(),
            default_budget: self.default_budget,
            dashboard: self.dashboard,
        }
    }

    /// Where the store lives.
    pub fn store(&self) -> StoreSettings {
        StoreSettings {
            database_url: self.database_url.clone(),
            sqlite_path: self.sqlite_path.clone(),
            max_connections: self.db_max_connections,
            acquire_timeout_ms: self.db_acquire_timeout_ms,
            commit_writers: self.db_commit_writers,
        }
    }
}

impl From<Config> for HttpSettings {
    fn from(config: Config) -> Self {
        config.http()
    }
}

impl From<&Config> for HttpSettings {
    fn from(config: &Config) -> Self {
        config.http()
    }
}
