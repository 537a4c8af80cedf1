//! Who is asking, and may they: API keys resolved to a [`Principal`], and the access rule of
//! every route.
//!
//! - `Authorization: Bearer cairn_<id>_<secret>`: the key is looked up by id (one primary-key
//!   read, no cache, so a revoke takes effect on the next request) and its secret's SHA-256 is
//!   compared with the stored one in constant time. Missing, malformed, unknown or revoked keys
//!   are `401` with `WWW-Authenticate: Bearer`; a key without the route's scope is `403`.
//! - `GET /v1/tasks/{id}/events?token=...` also accepts a stream token from
//!   `POST /v1/tasks/{id}/stream-token`, for `EventSource`, which cannot send headers: it is
//!   valid for that one task, with scope `read`, until it expires, and only while the key that
//!   asked for it is not revoked. An API key is never accepted in a URL.
//! - [`ACCESS`] names the rule of every route of the OpenAPI document; a route without one is
//!   refused (500, logged) and fails `tests/auth_matrix.rs`.
//! - [`AuthMode::DevUntilKeys`] (the default of [`AppState::new`], and what `cairn serve` runs on
//!   a loopback address while the store holds no key): every request is the default tenant with
//!   every scope, until the first key is created (checked at most once a second), and for
//!   good after that: revoking every key never turns authentication off.
//!
//! Handlers read the caller as an extractor: `principal: Principal`. Another tenant's task is
//! answered exactly like an unknown id (404), so ids of other tenants cannot be probed.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};

use crate::domain::task::DEFAULT_TENANT;
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::store::keys::{self, Scope};

/// The key id of every request in dev mode (and with `CAIRN_AUTH=off`).
pub const DEV_KEY_ID: &str = "dev";
/// How often dev mode re-checks whether a key was created.
const DEV_RECHECK_MS: i64 = 1_000;

/// The caller of a request: the key's id (safe to log; rate limits key on it), its tenant and
/// scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub key_id: String,
    pub tenant: String,
    pub scopes: Vec<Scope>,
}

impl Principal {
    /// Dev mode's caller: the default tenant with every scope.
    pub fn dev() -> Self {
        Principal {
            key_id: DEV_KEY_ID.into(),
            tenant: DEFAULT_TENANT.into(),
            scopes: Scope::ALL.to_vec(),
        }
    }

    /// Whether the key may do what `scope` allows; `admin` may also decide approvals.
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
            || (scope == Scope::Approve && self.scopes.contains(&Scope::Admin))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Principal>().cloned().ok_or_else(|| {
            ApiError::Internal("a protected route ran without the auth layer".into())
        })
    }
}

/// How requests are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Every protected route needs a key.
    Required,
    /// Dev mode while the store holds no key; [`AuthMode::Required`] from the first key on.
    DevUntilKeys,
    /// Explicitly off (`CAIRN_AUTH=off`): every request is [`Principal::dev`].
    Off,
}

/// The mode and dev mode's memory of whether keys exist (shared by clones of the state).
#[derive(Debug)]
pub struct AuthGate {
    mode: AuthMode,
    keys_seen: AtomicBool,
    checked_at: Mutex<Option<DateTime<Utc>>>,
}

impl AuthGate {
    pub fn new(mode: AuthMode) -> Self {
        Self {
            mode,
            keys_seen: AtomicBool::new(false),
            checked_at: Mutex::new(None),
        }
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// Whether this request runs in dev mode.
    async fn dev(&self, state: &AppState) -> Result<bool, ApiError> {
        match self.mode {
            AuthMode::Required => return Ok(false),
            AuthMode::Off => return Ok(true),
            AuthMode::DevUntilKeys => {}
        }
        if self.keys_seen.load(Ordering::Acquire) {
            return Ok(false);
        }
        let now = state.clock.now();
        let due = {
            let mut checked = self.checked_at.lock().unwrap_or_else(|p| p.into_inner());
            let due = checked.is_none_or(|at| now - at >= Duration::milliseconds(DEV_RECHECK_MS));
            if due {
                *checked = Some(now);
            }
            due
        };
        if due && state.store.has_api_keys().await? {
            self.keys_seen.store(true, Ordering::Release);
            tracing::warn!("an API key exists: dev mode is over, every request now needs a key");
            return Ok(false);
        }
        Ok(true)
    }
}

/// What a route requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No key needed: health, readiness, the OpenAPI document.
    Public,
    /// A key with this scope (tenant-scoped routes answer only the key's tenant).
    Scope(Scope),
}

/// The access rule of every route, by method and OpenAPI path.
pub const ACCESS: &[(&str, &str, Access)] = &[
    ("GET", "/healthz", Access::Public),
    ("GET", "/readyz", Access::Public),
    ("GET", "/openapi.json", Access::Public),
    ("POST", "/v1/tasks", Access::Scope(Scope::Submit)),
    ("GET", "/v1/tasks", Access::Scope(Scope::Read)),
    ("GET", "/v1/tasks/{id}", Access::Scope(Scope::Read)),
    (
        "POST",
        "/v1/tasks/{id}/cancel",
        Access::Scope(Scope::Submit),
    ),
    (
        "POST",
        "/v1/tasks/{id}/messages",
        Access::Scope(Scope::Submit),
    ),
    ("GET", "/v1/tasks/{id}/messages", Access::Scope(Scope::Read)),
    (
        "GET",
        "/v1/tasks/{id}/approvals",
        Access::Scope(Scope::Read),
    ),
    (
        "POST",
        "/v1/tasks/{id}/approvals/{approval}",
        Access::Scope(Scope::Approve),
    ),
    (
        "POST",
        "/v1/tasks/{id}/shadow",
        Access::Scope(Scope::Submit),
    ),
    ("GET", "/v1/tasks/{id}/shadow", Access::Scope(Scope::Read)),
    ("GET", "/v1/tasks/{id}/events", Access::Scope(Scope::Read)),
    (
        "POST",
        "/v1/tasks/{id}/stream-token",
        Access::Scope(Scope::Read),
    ),
    ("GET", "/v1/tasks/{id}/plans", Access::Scope(Scope::Read)),
    (
        "GET",
        "/v1/tasks/{id}/plans/{version}",
        Access::Scope(Scope::Read),
    ),
    (
        "GET",
        "/v1/tasks/{id}/plans/{version}/diff",
        Access::Scope(Scope::Read),
    ),
    ("GET", "/v1/tasks/{id}/ledger", Access::Scope(Scope::Read)),
    (
        "GET",
        "/v1/tasks/{id}/artifacts",
        Access::Scope(Scope::Read),
    ),
    ("GET", "/v1/stats", Access::Scope(Scope::Read)),
    ("GET", "/v1/stats/gate", Access::Scope(Scope::Read)),
    ("GET", "/v1/rollout", Access::Scope(Scope::Admin)),
    ("PUT", "/v1/rollout", Access::Scope(Scope::Admin)),
    ("GET", "/v1/tools", Access::Scope(Scope::Admin)),
    ("POST", "/v1/tools/refresh", Access::Scope(Scope::Admin)),
    ("GET", "/metrics", Access::Scope(Scope::Admin)),
];

/// The rule of a route; `None` when it has none (a bug the matrix test catches).
pub fn access(method: &str, path: &str) -> Option<Access> {
    ACCESS
        .iter()
        .find(|(m, p, _)| m.eq_ignore_ascii_case(method) && *p == path)
        .map(|(_, _, access)| *access)
}

/// The route layer: resolves the caller, checks the route's scope, and hands the
/// [`Principal`] to the handler.
pub async fn guard(
    State(state): State<AppState>,
    matched: Option<MatchedPath>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = matched.as_ref().map_or("", |m| m.as_str());
    let rule = if request.method() == Method::HEAD {
        access("GET", path)
    } else {
        access(request.method().as_str(), path)
    };
    let scope = match rule {
        Some(Access::Public) => return next.run(request).await,
        Some(Access::Scope(scope)) => scope,
        None => {
            let detail = format!("route {} {path} has no access rule", request.method());
            return ApiError::Internal(detail).into_response();
        }
    };
    let authorization = request.headers().get(header::AUTHORIZATION).cloned();
    let uri = request.uri().clone();
    let principal = match resolve(&state, authorization, &uri, path).await {
        Ok(principal) => principal,
        Err(error) => return error.into_response(),
    };
    if !principal.has(scope) {
        return ApiError::Forbidden(format!(
            "this key lacks the `{}` scope this route needs",
            scope.as_str()
        ))
        .into_response();
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// The caller of a request, or 401.
async fn resolve(
    state: &AppState,
    authorization: Option<HeaderValue>,
    uri: &Uri,
    path: &str,
) -> Result<Principal, ApiError> {
    if state.auth.dev(state).await? {
        return Ok(Principal::dev());
    }
    if let Some(value) = authorization {
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or_else(|| unauthorized("send the key as `Authorization: Bearer <key>`"))?;
        return key_principal(state, token).await;
    }
    if path == "/v1/tasks/{id}/events"
        && let Some(token) = query_token(uri.query())
    {
        return stream_principal(state, &token, uri.path()).await;
    }
    Err(unauthorized(
        "this route needs an API key: send `Authorization: Bearer <key>`",
    ))
}

fn unauthorized(detail: &str) -> ApiError {
    ApiError::Unauthorized(detail.to_string())
}

/// Resolves an API key; every failure reads the same to the client.
async fn key_principal(state: &AppState, token: &str) -> Result<Principal, ApiError> {
    let invalid = || unauthorized("the API key is not valid (unknown, malformed or revoked)");
    let (id, secret) = keys::parse_key(token).ok_or_else(invalid)?;
    let stored = state.store.get_api_key(id).await?.ok_or_else(invalid)?;
    if !keys::hashes_match(&keys::hash_secret(secret), &stored.secret_hash) {
        return Err(invalid());
    }
    if stored.key.revoked_at.is_some() {
        return Err(invalid());
    }
    Ok(Principal {
        key_id: stored.key.id,
        tenant: stored.key.tenant_id,
        scopes: stored.key.scopes,
    })
}

/// The `token` query parameter, if any.
fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "token")
        .map(|(_, value)| value.to_string())
}

/// Resolves a stream token for the task in `uri_path` (`/v1/tasks/{id}/events`).
async fn stream_principal(
    state: &AppState,
    token: &str,
    uri_path: &str,
) -> Result<Principal, ApiError> {
    let invalid = || unauthorized("the stream token is not valid for this task, or expired");
    let stored = state
        .store
        .get_stream_token(&keys::hash_secret(token))
        .await?
        .ok_or_else(invalid)?;
    let task = uri_path.split('/').nth(3).unwrap_or_default();
    if !task.eq_ignore_ascii_case(&stored.task_id.to_string())
        || stored.expires_at <= state.clock.now()
    {
        return Err(invalid());
    }
    let key = state.store.get_api_key(&stored.key_id).await?;
    if !key.is_some_and(|key| key.key.revoked_at.is_none() && key.key.tenant_id == stored.tenant_id)
    {
        return Err(invalid());
    }
    Ok(Principal {
        key_id: stored.key_id,
        tenant: stored.tenant_id,
        scopes: vec![Scope::Read],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_unique_and_lookups_ignore_method_case() {
        for (i, (method, path, _)) in ACCESS.iter().enumerate() {
            let twice = ACCESS[i + 1..]
                .iter()
                .any(|(m, p, _)| m == method && p == path);
            assert!(!twice, "{method} {path} has two rules");
        }
        assert_eq!(
            access("post", "/v1/tasks"),
            Some(Access::Scope(Scope::Submit))
        );
        assert_eq!(access("DELETE", "/v1/tasks"), None);
    }

    #[test]
    fn the_token_parameter_is_found_among_others() {
        assert_eq!(query_token(Some("after=3&token=abc")), Some("abc".into()));
        assert_eq!(query_token(Some("after=3")), None);
        assert_eq!(query_token(None), None);
    }
}
