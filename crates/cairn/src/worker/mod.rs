//! The worker pool: permits, claims, heartbeats, the reaper.
//!
//! Every `cairn serve` runs one [`pool::WorkerPool`] and one [`reaper::Reaper`]:
//!
//! - a worker takes a permit *before* it claims, so a process never holds a lease on a task it
//!   has no capacity to run; closing the permits is also how shutdown stops claiming;
//! - a claim is one store statement that sets the lease and bumps the fence; while the engine
//!   runs, [`lease`] heartbeats extend it and tell the engine to stop when it is lost;
//! - idle workers sleep until a [`crate::store::Wakeup::TaskRunnable`] hint or the polling
//!   interval, whichever comes first: hints make pickup fast, polling makes it certain;
//! - the reaper requeues expired leases periodically and once at start-up, which is how the
//!   tasks of a crashed process resume without anyone asking.
//!
//! Several processes (replicas on one Postgres database) can run pools side by side: the claim
//! statement and the fence keep one task on one worker at a time.

pub mod lease;
pub mod params;
pub mod pool;
pub mod reaper;
mod spend;

pub use params::PoolParams;
pub use pool::{ShutdownReport, WorkerPool};
pub use reaper::{Reaper, ReaperParams, claim_node};

use sha2::Digest;

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_string())
}

fn nonce() -> String {
    let short = uuid::Uuid::now_v7().simple().to_string();
    short[short.len() - 12..].to_string()
}

/// This process's node id: the configured one, or `{host}-{hash8}` of the data location (the
/// database URL or the SQLite file), stable across restarts of the same service on the same
/// host and data.
pub fn node_id(configured: Option<&str>, location: &str) -> String {
    if let Some(node) = configured {
        return node.to_string();
    }
    let digest = sha2::Sha256::digest(location.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let host: String = host_name()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{host}-{hex}")
}

/// A node id no other process uses (for when the node's lock is held by a live process).
pub fn unique_node_id(node: &str) -> String {
    format!("{node}-{}", nonce())
}

/// The prefix every worker id of `node` starts with.
pub fn node_prefix(node: &str) -> String {
    format!("{node}/")
}

/// A worker id of `node`: `{node}/{pid}-{nonce}`, readable in `claimed_by` when debugging and
/// unique even when a restarted process gets the same pid.
pub fn worker_id(node: &str) -> String {
    format!("{}{}-{}", node_prefix(node), std::process::id(), nonce())
}

/// A worker id of a node of its own: for pools that have no predecessor to reclaim from
/// (tests, benchmarks, `cairn eval`).
pub fn process_worker_id() -> String {
    worker_id(&unique_node_id(&host_name()))
}

/// Waits until a shutdown-style flag is raised; false if its sender went away without raising
/// it. Returns no guard, so callers may hold the future across other awaits.
pub(crate) async fn raised(flag: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    flag.wait_for(|up| *up).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_ids_carry_their_node_and_differ() {
        let node = node_id(None, "postgres://db/cairn");
        assert_eq!(node, node_id(None, "postgres://db/cairn"));
        assert_ne!(node, node_id(None, "/var/lib/cairn.db"));
        assert_eq!(node_id(Some("edge-1"), "anything"), "edge-1");
        let (a, b) = (worker_id(&node), worker_id(&node));
        assert_ne!(a, b);
        assert!(a.starts_with(&node_prefix(&node)), "{a}");
        assert!(a.contains(&format!("/{}-", std::process::id())), "{a}");
        assert!(!worker_id(&unique_node_id(&node)).starts_with(&node_prefix(&node)));
    }
}
