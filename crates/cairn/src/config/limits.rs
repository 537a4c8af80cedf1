//! The HTTP server's limits (`[http]` in the file, `CAIRN_HTTP_*`) and the database pool's
//! acquire timeout: their environment variables and range checks.

use super::{Config, ConfigError};

/// The `CAIRN_HTTP_*` variables and the `[http]` keys they set.
pub const HTTP_ENV_VARS: &[(&str, &str)] = &[
    ("CAIRN_HTTP_HEADER_TIMEOUT_MS", "http.header_timeout_ms"),
    ("CAIRN_HTTP_IDLE_TIMEOUT_MS", "http.idle_timeout_ms"),
    ("CAIRN_HTTP_BODY_TIMEOUT_MS", "http.body_timeout_ms"),
    ("CAIRN_HTTP_REQUEST_TIMEOUT_MS", "http.request_timeout_ms"),
    ("CAIRN_HTTP_MAX_CONNECTIONS", "http.max_connections"),
    ("CAIRN_HTTP_MAX_URI_BYTES", "http.max_uri_bytes"),
    ("CAIRN_HTTP_MAX_HEADER_BYTES", "http.max_header_bytes"),
    ("CAIRN_HTTP_MAX_HEADERS", "http.max_headers"),
    ("CAIRN_HTTP_RATE_PER_S", "http.rate_per_s"),
    ("CAIRN_HTTP_RATE_BURST", "http.rate_burst"),
    ("CAIRN_HTTP_SSE_PER_CLIENT", "http.sse_per_client"),
];

/// Every limit is a whole number.
fn parse<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    super::env::parse(name, value, "a whole number")
}

fn invalid(name: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        name: name.to_string(),
        message,
    }
}

impl Config {
    /// Applies the `CAIRN_HTTP_*` variables and `CAIRN_DB_ACQUIRE_TIMEOUT_MS`.
    pub(super) fn apply_limits_env(
        &mut self,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(value) = env("CAIRN_DB_ACQUIRE_TIMEOUT_MS") {
            self.db_acquire_timeout_ms = parse("CAIRN_DB_ACQUIRE_TIMEOUT_MS", &value)?;
        }
        for (name, _) in HTTP_ENV_VARS {
            let Some(value) = env(name) else { continue };
            let http = &mut self.http;
            match *name {
                "CAIRN_HTTP_HEADER_TIMEOUT_MS" => http.header_timeout_ms = parse(name, &value)?,
                "CAIRN_HTTP_IDLE_TIMEOUT_MS" => http.idle_timeout_ms = parse(name, &value)?,
                "CAIRN_HTTP_BODY_TIMEOUT_MS" => http.body_timeout_ms = parse(name, &value)?,
                "CAIRN_HTTP_REQUEST_TIMEOUT_MS" => http.request_timeout_ms = parse(name, &value)?,
                "CAIRN_HTTP_MAX_CONNECTIONS" => http.max_connections = parse(name, &value)?,
                "CAIRN_HTTP_MAX_URI_BYTES" => http.max_uri_bytes = parse(name, &value)?,
                "CAIRN_HTTP_MAX_HEADER_BYTES" => http.max_header_bytes = parse(name, &value)?,
                "CAIRN_HTTP_MAX_HEADERS" => http.max_headers = parse(name, &value)?,
                "CAIRN_HTTP_RATE_PER_S" => http.rate_per_s = parse(name, &value)?,
                "CAIRN_HTTP_RATE_BURST" => http.rate_burst = parse(name, &value)?,
                "CAIRN_HTTP_SSE_PER_CLIENT" => http.sse_per_client = parse(name, &value)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Timeouts within 100 ms..=1 h, the idle timeout within the header timeout, sizes below
    /// hyper's own limits (so a client sees a problem, not hyper's empty answer).
    pub(super) fn validate_http_limits(&self) -> Result<(), ConfigError> {
        self.validate_timeouts()?;
        self.validate_sizes()
    }

    /// Timeouts within 100 ms..=1 h; the idle timeout within the header timeout.
    fn validate_timeouts(&self) -> Result<(), ConfigError> {
        let http = &self.http;
        let timeouts = [
            (
                "http.header_timeout_ms (CAIRN_HTTP_HEADER_TIMEOUT_MS)",
                http.header_timeout_ms,
            ),
            (
                "http.idle_timeout_ms (CAIRN_HTTP_IDLE_TIMEOUT_MS)",
                http.idle_timeout_ms,
            ),
            (
                "http.body_timeout_ms (CAIRN_HTTP_BODY_TIMEOUT_MS)",
                http.body_timeout_ms,
            ),
            (
                "http.request_timeout_ms (CAIRN_HTTP_REQUEST_TIMEOUT_MS)",
                http.request_timeout_ms,
            ),
            (
                "db_acquire_timeout_ms (CAIRN_DB_ACQUIRE_TIMEOUT_MS)",
                self.db_acquire_timeout_ms,
            ),
        ];
        for (name, ms) in timeouts {
            if !(100..=3_600_000).contains(&ms) {
                return Err(invalid(name, format!("must be 100..=3600000, got {ms}")));
            }
        }
        if http.idle_timeout_ms > http.header_timeout_ms {
            return Err(invalid(
                "http.idle_timeout_ms (CAIRN_HTTP_IDLE_TIMEOUT_MS)",
                format!(
                    "must not exceed http.header_timeout_ms ({}), which also bounds an idle \
                     keep-alive connection",
                    http.header_timeout_ms
                ),
            ));
        }
        Ok(())
    }

    /// Sizes below hyper's own limits; a burst at least the rate.
    fn validate_sizes(&self) -> Result<(), ConfigError> {
        use crate::http::limits::{HYPER_MAX_HEAD, HYPER_MAX_HEADERS, HYPER_MAX_URI};
        let http = &self.http;
        let sizes = [
            (
                "http.max_connections (CAIRN_HTTP_MAX_CONNECTIONS)",
                http.max_connections,
                1,
                1 << 20,
            ),
            (
                "http.max_uri_bytes (CAIRN_HTTP_MAX_URI_BYTES)",
                http.max_uri_bytes,
                256,
                HYPER_MAX_URI,
            ),
            (
                "http.max_header_bytes (CAIRN_HTTP_MAX_HEADER_BYTES)",
                http.max_header_bytes,
                1024,
                HYPER_MAX_HEAD / 2,
            ),
            (
                "http.max_headers (CAIRN_HTTP_MAX_HEADERS)",
                http.max_headers,
                8,
                HYPER_MAX_HEADERS - 4,
            ),
        ];
        for (name, value, low, high) in sizes {
            if !(low..=high).contains(&value) {
                return Err(invalid(
                    name,
                    format!("must be {low}..={high}, got {value}"),
                ));
            }
        }
        if http.rate_per_s > 0 && http.rate_burst < http.rate_per_s {
            return Err(invalid(
                "http.rate_burst (CAIRN_HTTP_RATE_BURST)",
                format!("must be at least http.rate_per_s ({})", http.rate_per_s),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::load(None, move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn every_http_variable_reaches_its_setting() {
        let mut pairs: Vec<(&str, &str)> = HTTP_ENV_VARS
            .iter()
            .map(|(name, _)| match *name {
                "CAIRN_HTTP_MAX_HEADERS" => (*name, "50"),
                "CAIRN_HTTP_MAX_HEADER_BYTES" => (*name, "5000"),
                _ => (*name, "500"),
            })
            .collect();
        pairs.push(("CAIRN_DB_ACQUIRE_TIMEOUT_MS", "750"));
        let config = load(&pairs).expect("valid");
        let http = &config.http;
        assert_eq!(
            [
                http.header_timeout_ms,
                http.idle_timeout_ms,
                http.body_timeout_ms
            ],
            [500; 3]
        );
        assert_eq!(http.request_timeout_ms, 500);
        assert_eq!([http.max_connections, http.max_uri_bytes], [500; 2]);
        assert_eq!([http.max_header_bytes, http.max_headers], [5000, 50]);
        assert_eq!(http.sse_per_client, 500);
        assert_eq!([http.rate_per_s, http.rate_burst], [500; 2]);
        assert_eq!(config.db_acquire_timeout_ms, 750);
        assert_eq!(config.http().limits, config.http);
        assert_eq!(config.store().acquire_timeout_ms, 750);
    }

    #[test]
    fn bad_limits_name_their_variable() {
        for (pairs, named) in [
            (
                vec![("CAIRN_HTTP_HEADER_TIMEOUT_MS", "soon")],
                "CAIRN_HTTP_HEADER_TIMEOUT_MS",
            ),
            (
                vec![("CAIRN_HTTP_IDLE_TIMEOUT_MS", "20000")],
                "CAIRN_HTTP_IDLE_TIMEOUT_MS",
            ),
            (
                vec![("CAIRN_HTTP_MAX_URI_BYTES", "100000")],
                "CAIRN_HTTP_MAX_URI_BYTES",
            ),
            (
                vec![("CAIRN_HTTP_MAX_HEADERS", "200")],
                "CAIRN_HTTP_MAX_HEADERS",
            ),
            (
                vec![("CAIRN_HTTP_RATE_BURST", "1")],
                "CAIRN_HTTP_RATE_BURST",
            ),
            (
                vec![("CAIRN_DB_ACQUIRE_TIMEOUT_MS", "0")],
                "CAIRN_DB_ACQUIRE_TIMEOUT_MS",
            ),
        ] {
            let error = load(&pairs).unwrap_err().to_string();
            assert!(error.contains(named), "{error}");
        }
        let off = load(&[
            ("CAIRN_HTTP_RATE_PER_S", "0"),
            ("CAIRN_HTTP_RATE_BURST", "0"),
        ]);
        assert_eq!(off.expect("0 turns the rate limit off").http.rate_per_s, 0);
    }
}
