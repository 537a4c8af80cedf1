//! Deterministic idempotency keys for tool calls.
//!
//! The key is the hex SHA-256 of (task id, milestone id, step id, logical attempt). The same
//! logical call, repeated after a crash or a lost lease, gets the same key, so the tool (and
//! cairn's receipts) can tell a repeat from a new call; a retry the engine decides on (a new
//! logical attempt) gets a new key. Each part is length-prefixed so that no two different
//! tuples can hash the same input ("m1" + "2.s1" vs "m12" + ".s1").

use sha2::{Digest, Sha256};
use uuid::Uuid;

pub fn idempotency_key(task_id: Uuid, milestone_id: &str, step_id: &str, attempt: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"cairn.tool-call.v1");
    hasher.update(task_id.as_bytes());
    for part in [milestone_id.as_bytes(), step_id.as_bytes()] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.update(attempt.to_be_bytes());
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_deterministic_and_distinguish_every_part() {
        let task = Uuid::from_u128(7);
        let key = idempotency_key(task, "m1", "m1.s1", 1);
        assert_eq!(key.len(), 64);
        assert!(key.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(key, idempotency_key(task, "m1", "m1.s1", 1));
        let others = [
            idempotency_key(Uuid::from_u128(8), "m1", "m1.s1", 1),
            idempotency_key(task, "m2", "m1.s1", 1),
            idempotency_key(task, "m1", "m1.s2", 1),
            idempotency_key(task, "m1", "m1.s1", 2),
            idempotency_key(task, "m1m", "1.s1", 1),
        ];
        for other in others {
            assert_ne!(key, other);
        }
    }
}
