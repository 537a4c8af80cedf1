//! OAuth 2.0 client credentials for MCP servers that want a bearer token: fetched from the
//! token endpoint with the operator's client id and secret (`client_secret_basic`, or
//! `client_secret_post` where the server's metadata allows only that), kept until shortly
//! before it expires, then fetched again. Without a configured `token_url`, the endpoint is
//! discovered as MCP clients do: the server's protected resource metadata (RFC 9728) names
//! its authorization server, whose metadata (RFC 8414) names the token endpoint. A headless
//! service has no browser, so the interactive flows (authorization code) are not offered.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use super::config::{McpServerSpec, Oauth};
use super::error::McpError;
use crate::secret::Secret;

/// Renewed this long before the expiry the endpoint announced.
const MARGIN: Duration = Duration::from_secs(30);
/// Kept this long when the endpoint announces no expiry.
const UNANNOUNCED: Duration = Duration::from_secs(300);

#[derive(Deserialize)]
struct ResourceMetadata {
    #[serde(default)]
    authorization_servers: Vec<String>,
}

#[derive(Deserialize)]
struct ServerMetadata {
    token_endpoint: String,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Vec<String>,
}

/// Where and how to ask for a token.
struct Endpoint {
    url: String,
    /// Credentials in the form body (`client_secret_post`) instead of HTTP Basic.
    in_body: bool,
}

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
        let endpoint = match &oauth.token_url {
            Some(url) => Endpoint {
                url: url.clone(),
                in_body: false,
            },
            None => self.discover(server).await?,
        };
        let answer = self.request(server, oauth, &endpoint).await?;
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

    async fn request(
        &self,
        server: &McpServerSpec,
        oauth: &Oauth,
        endpoint: &Endpoint,
    ) -> Result<TokenAnswer, McpError> {
        let (body, basic) = token_request(server, oauth, endpoint);
        let refused = |message: String| {
            McpError::Connect(format!("OAuth token endpoint {}: {message}", endpoint.url))
        };
        let mut request = self
            .http
            .post(&endpoint.url)
            .timeout(Duration::from_millis(server.timeout_ms))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body);
        if let Some((id, secret)) = basic {
            request = request.basic_auth(id, Some(secret));
        }
        let response = request
            .send()
            .await
            .map_err(|error| refused(error.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(refused(format!("HTTP {status}")));
        }
        response
            .json()
            .await
            .map_err(|_| refused("the answer has no access_token".into()))
    }

    /// The token endpoint the server's metadata names.
    async fn discover(&self, server: &McpServerSpec) -> Result<Endpoint, McpError> {
        let failed = |message: String| {
            McpError::Connect(format!("OAuth discovery for {}: {message}", server.url))
        };
        let url = reqwest::Url::parse(&server.url).map_err(|e| failed(e.to_string()))?;
        let resource: ResourceMetadata = self
            .first_json(&well_known(&url, "oauth-protected-resource"), server)
            .await
            .ok_or_else(|| failed("no protected resource metadata".into()))?;
        let issuer = resource
            .authorization_servers
            .first()
            .and_then(|issuer| reqwest::Url::parse(issuer).ok())
            .ok_or_else(|| failed("its metadata names no authorization server".into()))?;
        let mut candidates = well_known(&issuer, "oauth-authorization-server");
        candidates.extend(well_known(&issuer, "openid-configuration"));
        let metadata: ServerMetadata = self
            .first_json(&candidates, server)
            .await
            .ok_or_else(|| failed(format!("no authorization server metadata at {issuer}")))?;
        let methods = &metadata.token_endpoint_auth_methods_supported;
        Ok(Endpoint {
            url: metadata.token_endpoint,
            in_body: !methods.is_empty()
                && !methods.iter().any(|m| m == "client_secret_basic")
                && methods.iter().any(|m| m == "client_secret_post"),
        })
    }

    /// The first of `urls` that answers JSON of that shape.
    async fn first_json<T: serde::de::DeserializeOwned>(
        &self,
        urls: &[String],
        server: &McpServerSpec,
    ) -> Option<T> {
        for url in urls {
            let answer = self
                .http
                .get(url)
                .timeout(Duration::from_millis(server.timeout_ms))
                .send()
                .await;
            if let Ok(response) = answer
                && response.status().is_success()
                && let Ok(value) = response.json::<T>().await
            {
                return Some(value);
            }
        }
        None
    }
}

/// The token request's form body, and the HTTP Basic credentials unless they go in the body.
fn token_request(
    server: &McpServerSpec,
    oauth: &Oauth,
    endpoint: &Endpoint,
) -> (String, Option<(String, String)>) {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials")
        .append_pair("resource", &server.url);
    if let Some(scope) = &oauth.scope {
        form.append_pair("scope", scope);
    }
    if endpoint.in_body {
        form.append_pair("client_id", &oauth.client_id)
            .append_pair("client_secret", oauth.client_secret.expose());
        return (form.finish(), None);
    }
    // RFC 6749 2.3.1: each part form-encoded, then Basic.
    let encoded = |text: &str| form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    let basic = (
        encoded(&oauth.client_id),
        encoded(oauth.client_secret.expose()),
    );
    (form.finish(), Some(basic))
}

/// The well-known URLs of `name` for `url`: with its path appended (RFC 9728, RFC 8414), then
/// at the root.
fn well_known(url: &reqwest::Url, name: &str) -> Vec<String> {
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/{name}{path}"));
    }
    urls.push(format!("{origin}/.well-known/{name}"));
    urls
}
