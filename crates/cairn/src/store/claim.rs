//! What a claim is asked for: who claims, when, for how long, and the per-tenant cap on
//! running tasks it must respect.

use std::num::NonZeroU32;

use chrono::{DateTime, Duration, Utc};
use sha2::{Digest, Sha256};

/// The arguments of [`super::Store::claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimParams<'a> {
    /// Written to `claimed_by`.
    pub worker_id: &'a str,
    pub now: DateTime<Utc>,
    /// The lease runs until `now + lease_ttl`.
    pub lease_ttl: Duration,
    /// At most this many tasks of one tenant run at once: a queued task of a tenant at its cap
    /// is passed over (it stays queued) and the next tenant's task is claimed instead. `None`:
    /// no cap. Every process claiming from one database must use the same cap; a claimer
    /// without one does not take part in the per-tenant serialisation.
    pub max_running_per_tenant: Option<NonZeroU32>,
    /// Tenants whose queued tasks stay queued: those at their spend cap for the period. A task
    /// whose `not_before` is later than `now` is passed over too.
    pub passed_over: &'a [String],
}

impl<'a> ClaimParams<'a> {
    /// A claim without a per-tenant cap.
    pub fn new(worker_id: &'a str, now: DateTime<Utc>, lease_ttl: Duration) -> Self {
        Self {
            worker_id,
            now,
            lease_ttl,
            max_running_per_tenant: None,
            passed_over: &[],
        }
    }

    /// The same claim, passing over the queued tasks of `tenants`.
    pub fn passing_over(self, tenants: &'a [String]) -> Self {
        Self {
            passed_over: tenants,
            ..self
        }
    }

    /// The same claim with at most `cap` running tasks per tenant (0 means no cap).
    pub fn with_cap(self, cap: u32) -> Self {
        Self {
            max_running_per_tenant: NonZeroU32::new(cap),
            ..self
        }
    }

    /// `now + lease_ttl`, saturating rather than overflowing on absurd TTLs.
    pub fn expires_at(&self) -> DateTime<Utc> {
        self.now
            .checked_add_signed(self.lease_ttl)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

/// The 32-bit key of a tenant for the claim's per-tenant advisory lock (two-key form, whose key
/// space does not overlap the node locks' 64-bit keys). A collision only makes two tenants'
/// capped claims wait for each other; it never lets a cap be exceeded.
pub(crate) fn tenant_key(tenant_id: &str) -> i32 {
    let digest = Sha256::digest(format!("cairn.tenant.v1:{tenant_id}").as_bytes());
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&digest[..4]);
    i32::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_means_no_cap() {
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let claim = ClaimParams::new("w", now, Duration::seconds(5));
        assert_eq!(claim.max_running_per_tenant, None);
        assert_eq!(claim.with_cap(0).max_running_per_tenant, None);
        assert_eq!(claim.with_cap(3).max_running_per_tenant, NonZeroU32::new(3));
        assert_eq!(claim.expires_at(), now + Duration::seconds(5));
        assert_eq!(
            ClaimParams::new("w", now, Duration::MAX).expires_at(),
            DateTime::<Utc>::MAX_UTC
        );
    }

    #[test]
    fn tenant_keys_are_stable_and_distinct() {
        assert_eq!(tenant_key("acme"), tenant_key("acme"));
        assert_ne!(tenant_key("acme"), tenant_key("globex"));
    }
}
