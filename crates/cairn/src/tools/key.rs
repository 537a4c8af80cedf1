//! Deterministic idempotency keys for tool calls, derived from what the call does.
//!
//! The key is the hex SHA-256 of (task id, tool, canonical arguments, [`Repeat`]). Canonical
//! arguments are the domain's canonical JSON ([`canonical_json`]: object keys sorted at every
//! level), so an action has one key however its arguments are ordered and whichever step,
//! milestone, retry, repair, plan version or claim asks for it. That is what makes side
//! effects happen at most once by content: an identical side-effecting call already performed
//! is answered from its receipt ([`super::client`]), across retries, repairs, strategy
//! replans and resume. A failed call leaves no receipt, so its retry is sent again, with the
//! same key (what a tool needs to recognise a repeat of a call whose answer was lost).
//!
//! Only [`Repeat`] tells identical calls apart, and only where repeating is deliberate: a step
//! list that performs the same action twice (the count of earlier identical steps in that
//! list), or an acceptance check, which must really run at every evaluation. Each part is
//! length-prefixed so that no two different tuples hash the same input.

use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::domain::plan::fingerprint::canonical_json;

/// What distinguishes a deliberate repetition of an identical call from the call itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repeat {
    /// How many earlier identical (tool, canonical args) actions the same step list holds:
    /// 0 for an action's first occurrence (then any identical call shares its key).
    Nth(u32),
    /// An evaluation of an acceptance check: every evaluation (and every claim of the task)
    /// really runs, never answered from an earlier evaluation's receipt.
    Check {
        milestone: String,
        /// The milestone's evaluation number (1-based).
        run: u32,
        /// The task's claim count when the check ran.
        claim: u32,
    },
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat::Nth(0)
    }
}

impl Repeat {
    /// The repeat counter of `(tool, args)` after the `earlier` actions of the same step list:
    /// how many of them are identical (same tool, same canonical arguments).
    pub fn among<'a>(
        tool: &str,
        args: &Value,
        earlier: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) -> Repeat {
        let canonical = canonical_json(args);
        let count = earlier
            .into_iter()
            .filter(|(t, a)| *t == tool && canonical_json(a) == canonical)
            .count();
        Repeat::Nth(u32::try_from(count).unwrap_or(u32::MAX))
    }
}

/// The idempotency key of calling `tool` with `args` for `task_id`, `repeat` apart.
pub fn idempotency_key(task_id: Uuid, tool: &str, args: &Value, repeat: &Repeat) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"cairn.tool-call.v2");
    hasher.update(task_id.as_bytes());
    let part = |hasher: &mut Sha256, bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    part(&mut hasher, tool.as_bytes());
    part(&mut hasher, canonical_json(args).as_bytes());
    match repeat {
        Repeat::Nth(n) => {
            hasher.update([0u8]);
            hasher.update(n.to_be_bytes());
        }
        Repeat::Check {
            milestone,
            run,
            claim,
        } => {
            hasher.update([1u8]);
            part(&mut hasher, milestone.as_bytes());
            hasher.update(run.to_be_bytes());
            hasher.update(claim.to_be_bytes());
        }
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(task: u128, tool: &str, args: Value, repeat: Repeat) -> String {
        idempotency_key(Uuid::from_u128(task), tool, &args, &repeat)
    }

    #[test]
    fn the_same_content_gets_the_same_key_whatever_the_key_order() {
        let first = key(
            7,
            "edit_file",
            json!({"path": "c/config.py", "find": "db.url"}),
            Repeat::Nth(0),
        );
        assert_eq!(first.len(), 64);
        assert!(first.chars().all(|c| c.is_ascii_hexdigit()));
        let reordered = key(
            7,
            "edit_file",
            json!({"find": "db.url", "path": "c/config.py"}),
            Repeat::default(),
        );
        assert_eq!(first, reordered);
    }

    #[test]
    fn different_content_gets_a_different_key() {
        let base = key(
            7,
            "edit_file",
            json!({"path": "a", "n": {"x": 1}}),
            Repeat::Nth(0),
        );
        let others = [
            key(
                8,
                "edit_file",
                json!({"path": "a", "n": {"x": 1}}),
                Repeat::Nth(0),
            ),
            key(
                7,
                "write_file",
                json!({"path": "a", "n": {"x": 1}}),
                Repeat::Nth(0),
            ),
            key(
                7,
                "edit_file",
                json!({"path": "b", "n": {"x": 1}}),
                Repeat::Nth(0),
            ),
            key(
                7,
                "edit_file",
                json!({"path": "a", "n": {"x": 2}}),
                Repeat::Nth(0),
            ),
            key(
                7,
                "edit_file",
                json!({"path": "a", "n": {"x": "1"}}),
                Repeat::Nth(0),
            ),
            // Length prefixes: the tool's name cannot run into the arguments.
            key(
                7,
                "edit_file{",
                json!({"path": "a", "n": {"x": 1}}),
                Repeat::Nth(0),
            ),
        ];
        for other in others {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn the_repeat_counter_distinguishes_deliberate_repeats() {
        let args = json!({"path": "a"});
        let once = key(7, "append", args.clone(), Repeat::Nth(0));
        let twice = key(7, "append", args.clone(), Repeat::Nth(1));
        assert_ne!(once, twice);
        let check = |run, claim| {
            key(
                7,
                "append",
                args.clone(),
                Repeat::Check {
                    milestone: "m1".into(),
                    run,
                    claim,
                },
            )
        };
        assert_ne!(check(1, 1), check(2, 1));
        assert_ne!(check(1, 1), check(1, 2));
        assert_ne!(check(1, 1), once);
        assert_eq!(check(1, 1), check(1, 1));
    }

    #[test]
    fn the_counter_counts_earlier_identical_actions_only() {
        let a = json!({"path": "a", "find": "x"});
        let a_reordered = json!({"find": "x", "path": "a"});
        let b = json!({"path": "b"});
        let earlier = [
            ("edit", &a_reordered),
            ("edit", &b),
            ("run", &a),
            ("edit", &a),
        ];
        assert_eq!(Repeat::among("edit", &a, earlier), Repeat::Nth(2));
        assert_eq!(Repeat::among("edit", &b, earlier), Repeat::Nth(1));
        assert_eq!(Repeat::among("edit", &a, []), Repeat::Nth(0));
        assert_eq!(Repeat::among("other", &a, earlier), Repeat::Nth(0));
    }
}
