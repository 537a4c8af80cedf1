//! `[prices]`: what the operator pays per model token and per tool call, so money is a budget
//! unit (`budget.cost`). Prices are written in units of the currency (0.15 per million tokens);
//! the engine books integer micro-units ([`crate::domain::price`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::price::{MICRO, ModelPrices, Prices, PurposeModels, TokenPrice};

/// The price table as configured.
///
/// ```toml
/// [prices]
/// currency = "USD"
/// [prices.models."gpt-4o-mini"]
/// input_per_million = 0.15
/// output_per_million = 0.60
/// [prices.tools]
/// lookup_user = 0.001
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PriceTable {
    pub currency: String,
    /// By model name, as the `[llm.*]` endpoints name it.
    pub models: BTreeMap<String, ModelRate>,
    /// Per call, by tool name.
    pub tools: BTreeMap<String, f64>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self {
            currency: "USD".into(),
            models: BTreeMap::new(),
            tools: BTreeMap::new(),
        }
    }
}

/// One model's prices, per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRate {
    pub input_per_million: f64,
    pub output_per_million: f64,
}

/// The dearest price accepted: above it a figure is a typo (a price in micro-units written as
/// units), not a price.
pub const MAX_PRICE: f64 = 1_000_000.0;

/// Why a price table is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("prices.{what} must be a number from 0 to {MAX_PRICE}, got {value}")]
    OutOfRange { what: String, value: String },
    #[error("prices.currency must not be empty")]
    NoCurrency,
    #[error(
        "money budgets (budget.cost, spend_caps) need a price for every model and tool, and {0} \
         has none in [prices]"
    )]
    Unpriced(String),
}

fn micro(what: String, value: f64) -> Result<u64, PriceError> {
    if !value.is_finite() || !(0.0..=MAX_PRICE).contains(&value) {
        return Err(PriceError::OutOfRange {
            what,
            value: value.to_string(),
        });
    }
    // At most 10^12 micro-units: exact in f64, and far below u64::MAX.
    Ok((value * MICRO as f64).round() as u64)
}

impl PriceTable {
    /// Range checks, before anything is resolved.
    pub fn validate(&self) -> Result<(), PriceError> {
        if self.currency.trim().is_empty() {
            return Err(PriceError::NoCurrency);
        }
        for (name, rate) in &self.models {
            micro(
                format!("models.{name}.input_per_million"),
                rate.input_per_million,
            )?;
            micro(
                format!("models.{name}.output_per_million"),
                rate.output_per_million,
            )?;
        }
        for (name, price) in &self.tools {
            micro(format!("tools.{name}"), *price)?;
        }
        Ok(())
    }

    /// The table resolved for the engine: each purpose's model priced, each tool priced.
    pub fn resolve(&self, models: &PurposeModels) -> Result<Prices, PriceError> {
        self.validate()?;
        let rate = |model: &Option<String>| -> Result<Option<TokenPrice>, PriceError> {
            let Some(rate) = model
                .as_ref()
                .and_then(|m| self.models.get(m).map(|r| (m, r)))
            else {
                return Ok(None);
            };
            let (name, rate) = rate;
            Ok(Some(TokenPrice {
                input: micro(format!("models.{name}"), rate.input_per_million)?,
                output: micro(format!("models.{name}"), rate.output_per_million)?,
            }))
        };
        let mut tools = BTreeMap::new();
        for (name, price) in &self.tools {
            tools.insert(name.clone(), micro(format!("tools.{name}"), *price)?);
        }
        Ok(Prices {
            currency: self.currency.clone(),
            models: ModelPrices {
                gate: rate(&models.gate)?,
                strategic: rate(&models.strategic)?,
                tactical: rate(&models.tactical)?,
                verifier: rate(&models.verifier)?,
            },
            tools,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::price::unpriced;

    fn table() -> PriceTable {
        let mut table = PriceTable::default();
        table.models.insert(
            "m".into(),
            ModelRate {
                input_per_million: 0.15,
                output_per_million: 0.6,
            },
        );
        table.tools.insert("lookup".into(), 0.001);
        table
    }

    fn all(model: &str) -> PurposeModels {
        PurposeModels {
            gate: Some(model.into()),
            strategic: Some(model.into()),
            tactical: Some(model.into()),
            verifier: Some(model.into()),
        }
    }

    #[test]
    fn a_table_resolves_to_micro_units_per_purpose() {
        let prices = table().resolve(&all("m")).unwrap();
        let price = TokenPrice {
            input: 150_000,
            output: 600_000,
        };
        assert_eq!(prices.models.tactical, Some(price));
        assert_eq!(prices.tool("lookup"), Some(1_000));
        assert_eq!(unpriced(&prices, &all("m"), ["lookup"]), None);
        assert_eq!(
            unpriced(&prices, &all("m"), ["lookup", "write"]).as_deref(),
            Some("the tool \"write\"")
        );
        let other = table().resolve(&all("other")).unwrap();
        assert_eq!(other.models.gate, None);
        assert_eq!(
            unpriced(&other, &all("other"), []).as_deref(),
            Some("the gate model \"other\"")
        );
    }

    #[test]
    fn a_negative_or_absurd_price_is_refused_in_plain_words() {
        let mut bad = table();
        bad.tools.insert("free".into(), -1.0);
        let error = bad.validate().unwrap_err().to_string();
        assert!(error.contains("prices.tools.free"), "{error}");
        let mut huge = table();
        huge.models.insert(
            "x".into(),
            ModelRate {
                input_per_million: f64::NAN,
                output_per_million: 1.0,
            },
        );
        assert!(huge.validate().is_err());
        let mut nameless = table();
        nameless.currency = " ".into();
        assert_eq!(nameless.validate(), Err(PriceError::NoCurrency));
    }
}
