//! What a worker pool runs with (the composition root fills it from the configuration).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::engine::Engine;
use crate::meters::Meters;
use crate::store::Store;

/// Everything a pool needs (the composition root fills the timings from the configuration).
#[derive(Clone)]
pub struct PoolParams {
    pub store: Arc<dyn Store>,
    pub engine: Arc<dyn Engine>,
    pub clock: Arc<dyn Clock>,
    /// Written to `claimed_by`; see [`super::worker_id`].
    pub worker_id: String,
    pub workers: usize,
    /// At most this many running tasks per tenant (see [`crate::store::ClaimParams`]); `None`:
    /// no cap.
    pub max_running_per_tenant: Option<NonZeroU32>,
    pub lease_ttl: Duration,
    pub heartbeat: Duration,
    pub poll_interval: Duration,
    /// What the engines' commits and the settlements count.
    pub meters: Meters,
    /// Each tenant's spend cap per period: the queued tasks of a tenant at its cap are passed
    /// over until the period ends.
    pub spend_caps: crate::domain::spend::SpendCaps,
}
