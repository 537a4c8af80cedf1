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
pub mod pool;
pub mod reaper;

pub use pool::{PoolParams, ShutdownReport, WorkerPool};
pub use reaper::{Reaper, ReaperParams};

/// A process-wide worker id, `hostname-pid-uuid`: readable in `claimed_by` when debugging, and
/// unique even when a restarted process gets the same pid.
pub fn process_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_string());
    let short = uuid::Uuid::now_v7().simple().to_string();
    format!(
        "{host}-{}-{}",
        std::process::id(),
        &short[short.len() - 12..]
    )
}

/// Waits until a shutdown-style flag is raised; false if its sender went away without raising
/// it. Returns no guard, so callers may hold the future across other awaits.
pub(crate) async fn raised(flag: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    flag.wait_for(|up| *up).await.is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn worker_ids_name_the_process_and_differ() {
        let a = super::process_worker_id();
        let b = super::process_worker_id();
        assert_ne!(a, b);
        assert!(a.contains(&format!("-{}-", std::process::id())), "{a}");
    }
}
