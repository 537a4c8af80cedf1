//! The `Idempotency-Key` header: parsing and the request hash it is bound to.
//!
//! A key maps to the task it first created. The store compares the hash of the canonical parsed
//! body, not the raw bytes, so a retry that only reorders keys or changes whitespace is still the
//! same request, while any change of meaning (goal, budget, strategy, metadata) is a conflict.

use axum::http::HeaderMap;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::http::error::ApiError;

pub const HEADER: &str = "idempotency-key";
/// Longer keys are refused: a UUID or a short hash is plenty.
pub const MAX_KEY_LEN: usize = 255;

/// The key from the request headers, if any. Present but empty, repeated, too long or not
/// printable ASCII is a 400.
pub fn key_from_headers(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::InvalidParameter(
            "send at most one Idempotency-Key header".into(),
        ));
    }
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_KEY_LEN {
        return Err(ApiError::InvalidParameter(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_LEN} characters, got {}",
            bytes.len()
        )));
    }
    if !bytes.iter().all(|byte| (0x21..=0x7e).contains(byte)) {
        return Err(ApiError::InvalidParameter(
            "Idempotency-Key must be printable ASCII without spaces".into(),
        ));
    }
    // Every byte was checked to be ASCII, so this conversion is lossless.
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// SHA-256 (hex) of `value` in the domain's canonical JSON (object keys sorted at every level),
/// so a replay with reordered keys or other whitespace is recognised as the same request.
pub fn canonical_hash(value: &Value) -> String {
    let canonical = crate::domain::plan::fingerprint::canonical_json(value);
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_hash_but_values_do() {
        let a =
            json!({"goal": "x", "budget": {"tokens": 1, "wall_ms": 2}, "m": [{"b": 1, "a": 2}]});
        let b: Value = serde_json::from_str(
            r#"{"m":[{"a":2,"b":1}],"budget":{"wall_ms":2,"tokens":1},"goal":"x"}"#,
        )
        .expect("json");
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        let c =
            json!({"goal": "y", "budget": {"tokens": 1, "wall_ms": 2}, "m": [{"b": 1, "a": 2}]});
        assert_ne!(canonical_hash(&a), canonical_hash(&c));
    }

    #[test]
    fn keys_are_bounded_and_printable() {
        let mut headers = HeaderMap::new();
        assert_eq!(key_from_headers(&headers).expect("none"), None);
        headers.insert(HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(
            key_from_headers(&headers).expect("ok").as_deref(),
            Some("abc-123")
        );
        for bad in ["", "has space", &"k".repeat(MAX_KEY_LEN + 1)] {
            headers.insert(HEADER, HeaderValue::from_str(bad).expect("header"));
            assert!(key_from_headers(&headers).is_err(), "{bad:?}");
        }
        headers.insert(
            HEADER,
            HeaderValue::from_bytes(b"caf\xc3\xa9").expect("header"),
        );
        assert!(key_from_headers(&headers).is_err());
        headers.insert(HEADER, HeaderValue::from_static("a"));
        headers.append(HEADER, HeaderValue::from_static("b"));
        assert!(key_from_headers(&headers).is_err());
    }
}
