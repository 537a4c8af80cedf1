//! A node's identity lock: proof that no other live process runs under this node id.
//!
//! A restarted `cairn serve` keeps its node id (configured, or derived from the host and the
//! data location), so the leases its dead predecessor held are recognisable by their worker id
//! prefix. Before reclaiming them at start-up, the new process takes the node's lock: a
//! PostgreSQL session advisory lock (released by the server when the session ends, so a
//! SIGKILLed holder frees it) or, for the SQLite file, an exclusive lock on a file beside the
//! database (released by the kernel when the holder dies). Holding it means no live process of
//! this node is running tasks, so its leases can be requeued at once instead of after they
//! expire; two live processes never run one task at once.

use sha2::{Digest, Sha256};

/// The held lock; dropping it releases it.
pub struct NodeLock {
    _held: Box<dyn std::any::Any + Send>,
}

impl NodeLock {
    pub(crate) fn new(held: Box<dyn std::any::Any + Send>) -> NodeLock {
        NodeLock { _held: held }
    }
}

impl std::fmt::Debug for NodeLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeLock")
    }
}

/// The 64-bit key of a node id (the advisory lock's key, the lock file's suffix).
pub fn node_key(node: &str) -> i64 {
    let digest = Sha256::digest(format!("cairn.node.v1:{node}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_stable_and_distinct() {
        assert_eq!(super::node_key("a"), super::node_key("a"));
        assert_ne!(super::node_key("a"), super::node_key("b"));
    }
}
