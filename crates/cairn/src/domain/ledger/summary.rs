//! The books as every reader sees them: `GET /v1/tasks/{id}/ledger`, a task's `result.ledger`
//! and each plan version's `ledger` show this one shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Ledger, Unit};

/// One milestone's figures in one unit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MilestoneFigures {
    /// Its share, grants included and returns excluded.
    pub allocated: i64,
    pub spent: i64,
    /// Drawn from the reserve when it ran short.
    pub granted: i64,
    /// Handed back to the reserve when it finished.
    pub returned: i64,
}

/// One unit's books.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UnitSummary {
    /// Held back when the plan was made.
    pub initial_reserve: i64,
    /// What the reserve holds now.
    pub reserve: i64,
    /// Spend not charged to a milestone (gate, planning, the goal verifier, the direct path).
    pub overhead: i64,
    /// Everything spent, overhead included.
    pub spent: i64,
    pub milestones: BTreeMap<String, MilestoneFigures>,
}

/// The books by unit name (`tokens`, `tool_calls`, `wall_ms`).
pub type LedgerSummary = BTreeMap<String, UnitSummary>;

impl Ledger {
    /// The books per unit as the API shows them.
    pub fn summary(&self) -> LedgerSummary {
        // Figures are far below i64::MAX (budgets are bounded); saturate rather than wrap.
        let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        Unit::ALL
            .iter()
            .map(|unit| {
                let book = self.book(*unit);
                let milestones = book
                    .accounts
                    .iter()
                    .map(|(id, a)| {
                        let figures = MilestoneFigures {
                            allocated: signed(a.allocated),
                            spent: signed(a.spent),
                            granted: signed(a.granted),
                            returned: signed(a.returned),
                        };
                        (id.clone(), figures)
                    })
                    .collect();
                let summary = UnitSummary {
                    initial_reserve: signed(book.initial_reserve),
                    reserve: signed(book.reserve),
                    overhead: signed(book.overhead_spent),
                    spent: signed(book.spent()),
                    milestones,
                };
                (unit.as_str().to_string(), summary)
            })
            .collect()
    }
}
