//! `[spend_caps]`: how much each tenant's tasks may spend per period of the calendar, in
//! micro-units of the price table's currency (as `budget.cost` is). Absent: no tenant is capped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::spend::{SpendCaps, SpendPeriod};
use crate::domain::task::MAX_COST;

/// The caps as configured.
///
/// ```toml
/// [spend_caps]
/// period = "day"          # hour, day or month, UTC
/// default = 5000000       # every tenant: 5 units of the currency a day
/// [spend_caps.tenants]
/// acme = 20000000         # acme's own cap
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpendCapTable {
    pub period: SpendPeriod,
    /// Every tenant's cap, unless it has its own.
    pub default: Option<u64>,
    /// Caps of named tenants.
    pub tenants: BTreeMap<String, u64>,
}

impl SpendCapTable {
    /// Each cap positive and at most `MAX_COST` (the largest `budget.cost`).
    pub fn resolve(&self) -> Result<SpendCaps, String> {
        let check = |what: String, cap: u64| {
            if cap == 0 || cap > MAX_COST {
                Err(format!(
                    "{what} must be 1..={MAX_COST} micro-units of the currency, got {cap}"
                ))
            } else {
                Ok(cap)
            }
        };
        let default = self
            .default
            .map(|cap| check("spend_caps.default".into(), cap))
            .transpose()?;
        let mut tenants = BTreeMap::new();
        for (tenant, cap) in &self.tenants {
            crate::store::keys::validate_tenant(tenant)
                .map_err(|error| format!("spend_caps.tenants: {error}"))?;
            tenants.insert(
                tenant.clone(),
                check(format!("spend_caps.tenants.{tenant}"), *cap)?,
            );
        }
        Ok(SpendCaps {
            period: self.period,
            default,
            tenants,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_resolve_or_name_what_is_wrong() {
        let table: SpendCapTable =
            toml::from_str("period = \"hour\"\ndefault = 500\n[tenants]\nacme = 900\n")
                .expect("parses");
        let caps = table.resolve().expect("valid");
        assert_eq!(caps.period, SpendPeriod::Hour);
        assert_eq!(caps.cap("acme"), Some(900));
        assert_eq!(caps.cap("other"), Some(500));
        let zero = SpendCapTable {
            default: Some(0),
            ..SpendCapTable::default()
        };
        let error = zero.resolve().expect_err("a cap of 0");
        assert!(error.contains("spend_caps.default"), "{error}");
        let bad = SpendCapTable {
            tenants: BTreeMap::from([("no spaces".to_string(), 5)]),
            ..SpendCapTable::default()
        };
        assert!(bad.resolve().is_err());
        assert!(toml::from_str::<SpendCapTable>("period = \"week\"").is_err());
        assert!(!SpendCapTable::default().resolve().expect("empty").any());
    }
}
