//! OAuth 2.0 client credentials for MCP servers that want a bearer token: fetched from the
//! server's token endpoint with the operator's client id and secret, kept until shortly before
//! it expires, then fetched again. A headless service has no browser, so the interactive
//! flows (authorization code) are not offered.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use super::config::McpServerSpec;
use super::error::McpError;
use crate::secret::Secret;

/// Renewed this long before the expiry the endpoint announced.
const MARGIN: Duration = Duration::from_secs(30);
/// Kept this long when the endpoint announces no expiry.
const UNANNOUNCED: Duration = Duration::from_secs(300);

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// Tokens by server name.
pub struct TokenCache {
    http: reqwest::Client,
    tokens: Mutex<HashMap<String, (Secret, Instant)>>,
}

impl TokenCache {
    pub fn new(http: reqwest::Client) -> TokenCache {
        TokenCache {
            http,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// The server's current token, fetched when missing or about to expire; `None` when the
    /// server takes no OAuth.
    pub async fn bearer(&self, server: &McpServerSpec) -> Result<Option<Secret>, McpError> {
        let Some(oauth) = &server.oauth else {
            return Ok(None);
        };
        let mut tokens = self.tokens.lock().await;
        if let Some((token, until)) = tokens.get(&server.name)
            && Instant::now() < *until
        {
            return Ok(Some(token.clone()));
        }
        let mut form = reqwest::Url::parse("http://form.invalid/")
            .map_err(|error| McpError::Connect(error.to_string()))?;
        form.query_pairs_mut()
            .append_pair("grant_type", "client_credentials")
            .append_pair("client_id", &oauth.client_id)
            .append_pair("client_secret", oauth.client_secret.expose());
        if let Some(scope) = &oauth.scope {
            form.query_pairs_mut().append_pair("scope", scope);
        }
        let body = form.query().unwrap_or_default().to_string();
        let refused = |message: String| {
            McpError::Connect(format!(
                "OAuth token endpoint {}: {message}",
                oauth.token_url
            ))
        };
        let response = self
            .http
            .post(&oauth.token_url)
            .timeout(Duration::from_millis(server.timeout_ms))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|error| refused(error.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(refused(format!("HTTP {status}")));
        }
        let answer: TokenAnswer = response
            .json()
            .await
            .map_err(|_| refused("the answer has no access_token".into()))?;
        let lifetime = answer
            .expires_in
            .map(Duration::from_secs)
            .unwrap_or(UNANNOUNCED)
            .saturating_sub(MARGIN)
            .max(Duration::from_secs(1));
        let token = Secret::new(answer.access_token);
        tokens.insert(
            server.name.clone(),
            (token.clone(), Instant::now() + lifetime),
        );
        Ok(Some(token))
    }
}
