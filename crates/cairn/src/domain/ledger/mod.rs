//! The budget ledger: where a task's budget is allowed to go, and where it went.
//!
//! A global cap says when to stop but not where the money went. The ledger holds back a reserve
//! (20% of each unit by default), splits the rest across milestones by estimated effort, records
//! every charge against the milestone that caused it, grants a milestone's deficit from the
//! reserve, and takes a passed milestone's unspent allocation back into the reserve. Tokens, tool
//! calls, wall-clock time and money (`cost`) are kept separately: they run out for different
//! reasons. Money is the one unit a budget may leave uncapped: its spend is still charged and
//! reported, but nothing is allocated, granted or exhausted ([`UnitBook::capped`]).
//!
//! Every change is a [`LedgerMovement`], and [`Ledger::apply`] is the only code that changes the
//! books: live operations compute their movements and apply them one by one, and
//! [`Ledger::replay`] applies stored ones. So the ledger rebuilt from its entries is, by
//! construction, the ledger that produced them.
//!
//! Task-level spend (gate, planners, goal verifier) is drawn from the reserve; spend before the
//! plan exists is owed until the books open, and the reserve the allocation funds pays it first
//! ([`Ledger::open`]). So every token spent is inside the budget, or visibly uncovered.
//!
//! Amounts are integers. Shares are rounded down, and the rounding remainder is left unallocated
//! (and reported) rather than slipped into the reserve, so the worked example (docs/scenarios.md,
//! "The worked example") holds to the token: 200,000 tokens with efforts 1,2,2,2 give a 40,000
//! reserve, 22,857 for m1, 45,714 for each other milestone, and 1 unallocated.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::task::Budget;

/// A ledger unit. Each is booked separately.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Tokens,
    ToolCalls,
    WallMs,
    /// Money in micro-units of the operator's currency, priced from the price table.
    Cost,
}

impl Unit {
    pub const ALL: [Unit; 4] = [Unit::Tokens, Unit::ToolCalls, Unit::WallMs, Unit::Cost];

    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Tokens => "tokens",
            Unit::ToolCalls => "tool_calls",
            Unit::WallMs => "wall_ms",
            Unit::Cost => "cost",
        }
    }

    pub fn parse(text: &str) -> Option<Unit> {
        Self::ALL.into_iter().find(|u| u.as_str() == text)
    }
}

/// One value per unit (totals, usage, fractions, books).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct PerUnit<T> {
    pub tokens: T,
    pub tool_calls: T,
    pub wall_ms: T,
    /// Absent in what was stored before money was a unit: zero then.
    #[serde(default)]
    pub cost: T,
}

impl<T> PerUnit<T> {
    pub fn get(&self, unit: Unit) -> &T {
        match unit {
            Unit::Tokens => &self.tokens,
            Unit::ToolCalls => &self.tool_calls,
            Unit::WallMs => &self.wall_ms,
            Unit::Cost => &self.cost,
        }
    }

    pub fn get_mut(&mut self, unit: Unit) -> &mut T {
        match unit {
            Unit::Tokens => &mut self.tokens,
            Unit::ToolCalls => &mut self.tool_calls,
            Unit::WallMs => &mut self.wall_ms,
            Unit::Cost => &mut self.cost,
        }
    }
}

/// A budget's totals; an uncapped `cost` is a total of 0 (no budget unit can be 0 otherwise),
/// which the books read as "counted, not capped" ([`UnitBook::capped`]).
impl From<Budget> for PerUnit<u64> {
    fn from(budget: Budget) -> Self {
        PerUnit {
            tokens: budget.tokens,
            tool_calls: budget.tool_calls,
            wall_ms: budget.wall_ms,
            cost: budget.cost.unwrap_or(0),
        }
    }
}

/// What a movement does. `allocate` funds the reserve (no milestone) or a milestone from the
/// task's total; `charge` records spend; `grant` moves reserve to a milestone; `return` moves a
/// milestone's unspent allocation back to the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MovementKind {
    Allocate,
    Charge,
    Grant,
    Return,
}

impl MovementKind {
    pub const ALL: [MovementKind; 4] = [
        MovementKind::Allocate,
        MovementKind::Charge,
        MovementKind::Grant,
        MovementKind::Return,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MovementKind::Allocate => "allocate",
            MovementKind::Charge => "charge",
            MovementKind::Grant => "grant",
            MovementKind::Return => "return",
        }
    }

    pub fn parse(text: &str) -> Option<MovementKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// One ledger entry. `milestone_id: None` is the task level: the reserve for `allocate`,
/// overhead (gate, planning, goal verification) for `charge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LedgerMovement {
    pub milestone_id: Option<String>,
    pub kind: MovementKind,
    pub unit: Unit,
    pub amount: u64,
}

impl LedgerMovement {
    /// Rebuilds a movement from its stored columns (kind and unit as text, amount as i64).
    pub fn from_parts(
        milestone_id: Option<String>,
        kind: &str,
        unit: &str,
        amount: i64,
    ) -> Result<LedgerMovement, LedgerError> {
        let bad = |what: String| LedgerError::Inconsistent(what);
        Ok(LedgerMovement {
            kind: MovementKind::parse(kind).ok_or_else(|| bad(format!("unknown kind {kind:?}")))?,
            unit: Unit::parse(unit).ok_or_else(|| bad(format!("unknown unit {unit:?}")))?,
            amount: u64::try_from(amount).map_err(|_| bad(format!("negative amount {amount}")))?,
            milestone_id,
        })
    }
}

/// A fraction in parts per million, so thresholds and shares are exact integer arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fraction {
    ppm: u32,
}

impl Fraction {
    const ONE: u64 = 1_000_000;

    /// Clamped to `0.0..=1.0`; NaN is zero.
    pub fn from_f64(value: f64) -> Fraction {
        let ppm = (value.clamp(0.0, 1.0) * Self::ONE as f64).round();
        Fraction {
            ppm: if ppm.is_nan() { 0 } else { ppm as u32 },
        }
    }

    pub fn as_f64(self) -> f64 {
        f64::from(self.ppm) / Self::ONE as f64
    }

    /// `floor(amount * self)`.
    pub fn of(self, amount: u64) -> u64 {
        (u128::from(amount) * u128::from(self.ppm) / u128::from(Self::ONE)) as u64
    }
}

/// The ledger's knob (default: a 20% reserve, as docs/architecture.md, "The engine", says). The
/// other ledger threshold, budget pressure at 80% of an allocation, is the engine's
/// `pressure_frac`, compared with [`Ledger::used`] by the milestone runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerPolicy {
    /// Share of each unit's total held back for grants.
    pub reserve: Fraction,
}

impl Default for LedgerPolicy {
    fn default() -> Self {
        Self {
            reserve: Fraction::from_f64(0.2),
        }
    }
}

/// One milestone's books in one unit. `allocated` already includes grants and excludes returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct Account {
    pub allocated: u64,
    pub spent: u64,
    pub granted: u64,
    pub returned: u64,
}

impl Account {
    /// Spend not covered by the allocation (only after the reserve ran dry).
    pub fn overrun(&self) -> u64 {
        self.spent.saturating_sub(self.allocated)
    }
}

/// The books of one unit. Invariant (checked by [`UnitBook::conserved`]):
/// `total = reserve + sum(allocated) + unallocated + overhead_drawn`; and everything spent is
/// within the total unless some of it is [`UnitBook::uncovered`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct UnitBook {
    pub total: u64,
    pub reserve: u64,
    /// Everything the reserve was allocated (at the opening, and by later allocations).
    #[serde(default)]
    pub initial_reserve: u64,
    /// Rounding remainder never allocated.
    pub unallocated: u64,
    /// Task-level spend (charges without a milestone).
    pub overhead_spent: u64,
    /// The part of `overhead_spent` the reserve covered.
    pub overhead_drawn: u64,
    pub accounts: BTreeMap<String, Account>,
}

impl UnitBook {
    /// Whether the budget caps this unit. An uncapped unit (a total of 0: money without a
    /// `budget.cost`) is charged like any other, but never allocated, granted, returned or
    /// exhausted, and nothing is ever uncovered in it.
    pub fn capped(&self) -> bool {
        self.total > 0
    }

    pub fn allocated(&self) -> u64 {
        self.accounts.values().map(|a| a.allocated).sum()
    }

    /// Everything spent in this unit, milestones and overhead.
    pub fn spent(&self) -> u64 {
        self.accounts.values().map(|a| a.spent).sum::<u64>() + self.overhead_spent
    }

    pub fn conserved(&self) -> bool {
        self.reserve + self.allocated() + self.unallocated + self.overhead_drawn == self.total
    }

    /// Task-level spend the reserve has not covered yet (spend before the books opened, or
    /// beyond an empty reserve).
    pub fn owed(&self) -> u64 {
        self.overhead_spent.saturating_sub(self.overhead_drawn)
    }

    /// Spend nothing in the budget covers: owed overhead plus milestones' overruns. While it is
    /// zero, `spent() <= total`; the engine stops a task as `budget_exhausted` when it is not.
    pub fn uncovered(&self) -> u64 {
        if !self.capped() {
            return 0;
        }
        self.owed() + self.accounts.values().map(Account::overrun).sum::<u64>()
    }

    /// Owed overhead is paid from the reserve as soon as the reserve has funds (when the books
    /// open and when a milestone returns its unspent allocation).
    fn settle_overhead(&mut self) {
        let settle = self.owed().min(self.reserve);
        self.reserve -= settle;
        self.overhead_drawn += settle;
    }
}

/// Why a ledger operation was refused. Running out of budget is not an error: see
/// [`BudgetExhausted`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("a ledger needs at least one milestone")]
    NoMilestones,
    #[error("milestone {0} appears twice in the allocation")]
    DuplicateMilestone(String),
    #[error("milestone {0} has effort 0")]
    ZeroEffort(String),
    #[error("milestone {0} has no ledger account")]
    UnknownMilestone(String),
    #[error("ledger movements do not add up: {0}")]
    Inconsistent(String),
}

/// A milestone (or the task's overhead) spent more than its allocation and the reserve could
/// cover: the task stops as `budget_exhausted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BudgetExhausted {
    pub milestone_id: Option<String>,
    pub unit: Unit,
    /// Spend beyond what could be covered.
    pub overrun: u64,
}

/// The result of a charge: the movements to persist, the fraction of the allocation now used
/// per unit (spent / allocated, with an empty allocation counted as 1), and any exhaustion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargeOutcome {
    pub movements: Vec<LedgerMovement>,
    pub used: PerUnit<f64>,
    pub exhausted: Vec<BudgetExhausted>,
}

impl ChargeOutcome {
    pub fn is_exhausted(&self) -> bool {
        !self.exhausted.is_empty()
    }
}

/// The four unit books of one task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct Ledger {
    #[schema(value_type = Object)]
    books: PerUnit<UnitBook>,
}

mod lend;
pub use lend::Lenders;
mod ops;
mod rebalance;

mod reads;

mod summary;
pub use summary::{LedgerSummary, MilestoneFigures, UnitSummary};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod open_tests;
