//! Fingerprints of proposed step lists, so a repair that proposes what was already tried
//! escalates instead of looping (first seed: "repair thrash").
//!
//! Normalised: tool names and arguments only (ids, expected outputs and statuses do not make
//! two proposals different), object keys sorted, so equivalent proposals hash the same.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::plan::Step;

pub fn fingerprint(steps: &[Step]) -> String {
    let mut hasher = Sha256::new();
    for step in steps {
        hasher.update(step.tool.trim().as_bytes());
        hasher.update([0u8]);
        hasher.update(canonical(&step.args).as_bytes());
        hasher.update([1u8]);
    }
    let digest = hasher.finalize();
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}
