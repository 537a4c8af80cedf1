//! API keys and SSE stream tokens: their stored form, and the token format.
//!
//! A key is shown once, at creation, as `cairn_<id>_<secret>`: `id` is 16 hex digits (the
//! lookup key, safe to log and to show), `secret` 64 hex digits from the operating system's
//! random source (256 bits). Only the SHA-256 of the secret is stored; a presented key is looked
//! up by its id and its secret's hash compared in constant time. A stream token is
//! `cairn_st_<secret>`, stored by the hash of the whole token, bound to one task and expiring
//! within minutes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::domain::task::TaskId;

/// Every key starts with this, so a leaked one is easy to recognise (and to scan for).
pub const KEY_PREFIX: &str = "cairn_";
/// Stream tokens start with this; they are never accepted as API keys.
pub const STREAM_TOKEN_PREFIX: &str = "cairn_st_";
const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;

/// What a key may do. Scopes are independent (`admin` does not imply `read`), except that
/// `admin` may also decide approvals.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// GET the tenant's own tasks, events, plans, ledger, artifacts and statistics.
    Read,
    /// Submit and cancel tasks, start shadow runs.
    Submit,
    /// Rollout, tools, statistics of any tenant.
    Admin,
    /// Decide the tenant's approval requests (`admin` may too).
    Approve,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Submit, Scope::Admin, Scope::Approve];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Submit => "submit",
            Scope::Admin => "admin",
            Scope::Approve => "approve",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == text.trim())
    }
}

/// Parses `read,submit[,admin][,approve]` into a sorted, de-duplicated list; at least one scope.
pub fn parse_scopes(text: &str) -> Result<Vec<Scope>, KeyError> {
    let mut scopes = Vec::new();
    for item in text.split(',').filter(|item| !item.trim().is_empty()) {
        let scope = Scope::parse(item).ok_or_else(|| KeyError::UnknownScope(item.to_string()))?;
        scopes.push(scope);
    }
    scopes.sort();
    scopes.dedup();
    if scopes.is_empty() {
        return Err(KeyError::NoScopes);
    }
    Ok(scopes)
}

/// The stored text form of scopes: `read,submit`.
pub fn scopes_text(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Problems with a key request or a stored key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("unknown scope {0:?}; use read, submit, admin and/or approve")]
    UnknownScope(String),
    #[error("give at least one scope: read, submit, admin and/or approve")]
    NoScopes,
    #[error("tenant must be 1 to 64 characters of letters, digits, '.', '_' or '-', got {0:?}")]
    BadTenant(String),
    #[error("the operating system's random source failed: {0}")]
    Random(String),
}

/// Checks a tenant id given on the command line.
pub fn validate_tenant(tenant: &str) -> Result<(), KeyError> {
    let ok = !tenant.is_empty()
        && tenant.len() <= 64
        && tenant
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(KeyError::BadTenant(tenant.to_string()))
    }
}

/// A key as listed: never the secret, nor its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub tenant_id: String,
    pub scopes: Vec<Scope>,
    pub name: Option<String>,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::domain::instant::millis_opt")]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A key with the hash its presented secret is compared against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredApiKey {
    pub key: ApiKey,
    pub secret_hash: String,
}

/// A key to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiKey {
    pub id: String,
    pub tenant_id: String,
    pub scopes: Vec<Scope>,
    pub name: Option<String>,
    pub secret_hash: String,
}

/// A new key and the token to hand to its owner, once.
#[derive(Debug, Clone)]
pub struct GeneratedKey {
    pub new: NewApiKey,
    pub token: crate::secret::Secret,
}

/// A stream token to insert (by the hash of the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStreamToken {
    pub token_hash: String,
    pub task_id: TaskId,
    pub tenant_id: String,
    pub key_id: String,
    pub expires_at: DateTime<Utc>,
}

/// A stored stream token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamToken {
    pub task_id: TaskId,
    pub tenant_id: String,
    pub key_id: String,
    pub expires_at: DateTime<Utc>,
}

fn random_hex(bytes: usize) -> Result<String, KeyError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|error| KeyError::Random(error.to_string()))?;
    Ok(hex(&buffer))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// SHA-256 (hex) of a secret or token: what is stored instead of it.
pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// Compares two hashes in time independent of where they differ.
pub fn hashes_match(presented: &str, stored: &str) -> bool {
    let (a, b) = (presented.as_bytes(), stored.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// A fresh key for `tenant` with `scopes`.
pub fn generate_key(
    tenant: &str,
    scopes: Vec<Scope>,
    name: Option<String>,
) -> Result<GeneratedKey, KeyError> {
    validate_tenant(tenant)?;
    if scopes.is_empty() {
        return Err(KeyError::NoScopes);
    }
    let id = random_hex(ID_BYTES)?;
    let secret = random_hex(SECRET_BYTES)?;
    let token = crate::secret::Secret::new(format!("{KEY_PREFIX}{id}_{secret}"));
    let new = NewApiKey {
        id,
        tenant_id: tenant.to_string(),
        scopes,
        name,
        secret_hash: hash_secret(&secret),
    };
    Ok(GeneratedKey { new, token })
}

/// Splits a presented key into its id and secret; `None` when it is not shaped like a key.
pub fn parse_key(token: &str) -> Option<(&str, &str)> {
    if token.starts_with(STREAM_TOKEN_PREFIX) {
        return None;
    }
    let rest = token.strip_prefix(KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let is_hex = |text: &str, len: usize| {
        text.len() == len
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    (is_hex(id, ID_BYTES * 2) && is_hex(secret, SECRET_BYTES * 2)).then_some((id, secret))
}

/// A fresh stream token (returned to the client) and the hash to store.
pub fn generate_stream_token() -> Result<(String, String), KeyError> {
    let token = format!("{STREAM_TOKEN_PREFIX}{}", random_hex(SECRET_BYTES)?);
    let hash = hash_secret(&token);
    Ok((token, hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_only_their_hash_is_kept() {
        let generated = generate_key("acme", vec![Scope::Read], Some("ci".into())).expect("key");
        let token = generated.token.expose();
        let (id, secret) = parse_key(token).expect("parses");
        assert_eq!(id, generated.new.id);
        assert!(hashes_match(
            &hash_secret(secret),
            &generated.new.secret_hash
        ));
        assert!(!generated.new.secret_hash.contains(secret));
        let other = generate_key("acme", vec![Scope::Read], None).expect("key");
        assert_ne!(other.new.id, generated.new.id);
        assert!(!hashes_match(&hash_secret(secret), &other.new.secret_hash));
    }

    #[test]
    fn malformed_keys_and_stream_tokens_are_not_keys() {
        let (token, _) = generate_stream_token().expect("token");
        for bad in [
            "",
            "cairn_",
            "cairn_abc_def",
            "Bearer x",
            token.as_str(),
            "cairn_0123456789abcdef_XYZ",
        ] {
            assert_eq!(parse_key(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn scopes_parse_sorted_and_refuse_unknown_or_none() {
        assert_eq!(
            parse_scopes("submit, read,read").expect("ok"),
            vec![Scope::Read, Scope::Submit]
        );
        assert_eq!(scopes_text(&[Scope::Read, Scope::Admin]), "read,admin");
        assert_eq!(parse_scopes("").unwrap_err(), KeyError::NoScopes);
        assert!(matches!(
            parse_scopes("read,root"),
            Err(KeyError::UnknownScope(_))
        ));
    }

    #[test]
    fn tenants_are_short_plain_names() {
        assert!(validate_tenant("acme-1.eu_west").is_ok());
        for bad in ["", "a b", "x/y", &"t".repeat(65)] {
            assert!(validate_tenant(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hash_comparison_requires_equal_length_and_bytes() {
        assert!(hashes_match("abcd", "abcd"));
        assert!(!hashes_match("abcd", "abce"));
        assert!(!hashes_match("abc", "abcd"));
    }
}
