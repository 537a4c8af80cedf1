//! What a call costs in money, so `cost` is booked like the other ledger units.
//!
//! The operator's price table (`[prices]`, docs/configuration.md) names models and tools; the
//! composition root resolves it to the model each purpose is sent to, and the engine prices
//! every call with it: before the call its worst case (the reservation), after it the usage the
//! provider reported. Amounts are integer micro-units of the operator's currency (1,000,000 is
//! one unit), each price rounded up, so a fraction of a micro-unit is never booked as free.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Micro-units in one unit of currency.
pub const MICRO: u64 = 1_000_000;

/// A model's prices in micro-units per million tokens, read (the prompt) and written (the
/// answer) apart: providers price them differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenPrice {
    pub input: u64,
    pub output: u64,
}

impl TokenPrice {
    /// The price of `input` prompt tokens and `output` answer tokens.
    pub fn of(self, input: u64, output: u64) -> u64 {
        per_million(input, self.input).saturating_add(per_million(output, self.output))
    }
}

/// `ceil(tokens * price / 1,000,000)`, saturating.
fn per_million(tokens: u64, price: u64) -> u64 {
    let product = u128::from(tokens) * u128::from(price);
    u64::try_from(product.div_ceil(u128::from(MICRO))).unwrap_or(u64::MAX)
}

/// The four kinds of model call, as the price table is resolved for them: each may be sent to
/// a different model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModelPrices {
    pub gate: Option<TokenPrice>,
    pub strategic: Option<TokenPrice>,
    pub tactical: Option<TokenPrice>,
    pub verifier: Option<TokenPrice>,
}

/// The price table as the engine reads it. A model or tool without a price costs nothing to a
/// task without a money cap; a task with one is never sent a call nobody priced (the engine
/// refuses it), and a server whose default budget caps money refuses to start with one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Prices {
    /// The currency's name, as the operator wrote it (`USD`, `EUR`, `credits`).
    pub currency: String,
    pub models: ModelPrices,
    /// Micro-units per call, by tool name.
    pub tools: BTreeMap<String, u64>,
}

impl Prices {
    /// A tool call's price: `None` when the tool has none.
    pub fn tool(&self, name: &str) -> Option<u64> {
        self.tools.get(name).copied()
    }
}

/// The model each purpose is sent to, as the endpoints name it (`None`: not configured).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurposeModels {
    pub gate: Option<String>,
    pub strategic: Option<String>,
    pub tactical: Option<String>,
    pub verifier: Option<String>,
}

/// The price table and what it was resolved for: enough to tell whether a money cap can be
/// honoured for the tools registered now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pricing {
    pub prices: Prices,
    pub models: PurposeModels,
}

impl Pricing {
    /// The first model or tool nothing prices, named for the operator (`None`: all priced). A
    /// server that caps money by default refuses to start with one, and a task that asks for a
    /// money cap is refused while one is unpriced.
    pub fn unpriced<'a>(&self, tools: impl IntoIterator<Item = &'a str>) -> Option<String> {
        unpriced(&self.prices, &self.models, tools)
    }
}

/// [`Pricing::unpriced`] over its parts.
pub fn unpriced<'a>(
    prices: &Prices,
    models: &PurposeModels,
    tools: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let purposes = [
        ("gate", &models.gate, prices.models.gate),
        ("strategic", &models.strategic, prices.models.strategic),
        ("tactical", &models.tactical, prices.models.tactical),
        ("verifier", &models.verifier, prices.models.verifier),
    ];
    for (purpose, model, price) in purposes {
        if price.is_none() {
            let model = model.as_deref().unwrap_or("(none configured)");
            return Some(format!("the {purpose} model {model:?}"));
        }
    }
    tools
        .into_iter()
        .find(|name| prices.tool(name).is_none())
        .map(|name| format!("the tool {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_is_rounded_up_to_the_micro_unit_and_never_overflows() {
        // 0.15 per million input tokens, 0.60 per million output tokens.
        let price = TokenPrice {
            input: 150_000,
            output: 600_000,
        };
        assert_eq!(price.of(1_000_000, 0), 150_000);
        assert_eq!(price.of(0, 1_000_000), 600_000);
        // 1 token at 0.15 per million is 0.15 micro-units: booked as 1.
        assert_eq!(price.of(1, 0), 1);
        assert_eq!(price.of(0, 0), 0);
        assert_eq!(price.of(1_000, 500), 150 + 300);
        let dear = TokenPrice {
            input: u64::MAX,
            output: u64::MAX,
        };
        assert_eq!(dear.of(u64::MAX, u64::MAX), u64::MAX);
    }
}
