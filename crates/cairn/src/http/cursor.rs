//! Opaque keyset cursors for `GET /v1/tasks`.
//!
//! A cursor names the last task of the previous page; the next page holds tasks with lower ids
//! (UUIDv7, so older). It is versioned (`c1.`) so its format can change without breaking clients
//! that hold an old one: an unknown version is refused rather than misread.

use uuid::Uuid;

use crate::http::error::ApiError;

const PREFIX: &str = "c1.";

pub fn encode(last: Uuid) -> String {
    format!("{PREFIX}{}", last.simple())
}

pub fn decode(cursor: &str) -> Result<Uuid, ApiError> {
    let invalid = || {
        ApiError::InvalidCursor(
            "the cursor was not issued by this server; pass `next_cursor` from a previous page \
             unchanged, or omit it to start from the newest task"
                .into(),
        )
    };
    let hex = cursor.strip_prefix(PREFIX).ok_or_else(invalid)?;
    if hex.len() != 32 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    Uuid::parse_str(hex).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_anything_else() {
        let id = Uuid::now_v7();
        assert_eq!(decode(&encode(id)).expect("valid"), id);
        for bad in [
            "",
            "c1.",
            "c2.0123",
            "garbage",
            &id.to_string(),
            "c1.zz",
            &format!("c1.{}", id),
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
    }
}
