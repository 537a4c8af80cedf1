//! The worker pool: permits, claims, heartbeats, the reaper.
