//! The budget ledger as the engine keeps it: three units, each with a reserve and per-milestone
//! allocations, and the glue that turns every movement into a ledger entry and an event.
//!
//! Why movements: the ledger of a task must be derivable from its `ledger_entries` rows alone
//! (ARCHITECTURE §5), so every change here is produced as a [`Movement`] and persisted in the
//! same transaction as the state it changes. Tokens, tool calls and wall-clock time are kept
//! apart because they run out for different reasons.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::checkpoint::{Record, Spend, TaskState};
use crate::domain::task::Budget;
use crate::store::NewLedgerEntry;

pub const UNITS: [&str; 3] = ["tokens", "tool_calls", "wall_ms"];

/// One ledger movement: `allocate`, `reserve`, `charge`, `grant` or `return`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Movement {
    pub milestone_id: Option<String>,
    pub kind: String,
    pub unit: String,
    pub amount: u64,
}

impl Movement {
    fn new(milestone: Option<&str>, kind: &str, unit: &str, amount: u64) -> Self {
        Self {
            milestone_id: milestone.map(str::to_string),
            kind: kind.into(),
            unit: unit.into(),
            amount,
        }
    }
}

/// One unit's books.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UnitBook {
    pub total: u64,
    pub reserve: u64,
    /// Left over by floor rounding of the effort split; never allocated.
    pub unallocated: u64,
    pub alloc: BTreeMap<String, u64>,
    pub spent: BTreeMap<String, u64>,
    pub granted: BTreeMap<String, u64>,
    pub returned: BTreeMap<String, u64>,
}

impl UnitBook {
    fn fraction(&self, milestone: &str) -> f64 {
        let alloc = self.alloc.get(milestone).copied().unwrap_or(0);
        let spent = self.spent.get(milestone).copied().unwrap_or(0);
        if alloc == 0 {
            return if spent == 0 { 0.0 } else { f64::INFINITY };
        }
        spent as f64 / alloc as f64
    }
}

/// The ledger of one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LedgerBook {
    pub units: BTreeMap<String, UnitBook>,
}

/// The result of one charge.
#[derive(Debug, Clone, PartialEq)]
pub struct Charged {
    pub movements: Vec<Movement>,
    /// Largest spent/allocation fraction across units after the charge.
    pub fraction: f64,
    /// The unit that could not be covered, reserve included.
    pub exhausted: Option<String>,
}

fn unit_amount(spend: Spend, unit: &str) -> u64 {
    match unit {
        "tokens" => spend.tokens,
        "tool_calls" => spend.tool_calls,
        _ => spend.wall_ms,
    }
}

impl LedgerBook {
    /// Holds back `reserve_frac` of each unit and splits the rest by effort, rounding down.
    pub fn allocate(
        budget: &Budget,
        shares: &[(String, u32)],
        reserve_frac: f64,
    ) -> (Self, Vec<Movement>) {
        let mut book = LedgerBook::default();
        let mut movements = Vec::new();
        let effort: u64 = shares
            .iter()
            .map(|(_, e)| u64::from(*e))
            .sum::<u64>()
            .max(1);
        for unit in UNITS {
            let total = match unit {
                "tokens" => budget.tokens,
                "tool_calls" => budget.tool_calls,
                _ => budget.wall_ms,
            };
            let reserve = (total as f64 * reserve_frac).floor() as u64;
            let pool = total - reserve.min(total);
            let mut books = UnitBook {
                total,
                reserve,
                ..UnitBook::default()
            };
            movements.push(Movement::new(None, "reserve", unit, reserve));
            let mut given = 0;
            for (id, e) in shares {
                let amount = pool * u64::from(*e) / effort;
                given += amount;
                books.alloc.insert(id.clone(), amount);
                movements.push(Movement::new(Some(id), "allocate", unit, amount));
            }
            books.unallocated = pool - given;
            book.units.insert(unit.to_string(), books);
        }
        (book, movements)
    }

    /// Gives the milestones a strategy replan left unfinished their shares of `pool` (per unit:
    /// what the replaced milestones returned), split by effort. They are grants: the amounts
    /// move from the reserve, so the reserve stays derivable as reserve + returns - grants.
    pub fn grant_shares(
        &mut self,
        shares: &[(String, u32)],
        pool: &BTreeMap<String, u64>,
    ) -> Vec<Movement> {
        let mut movements = Vec::new();
        let effort: u64 = shares
            .iter()
            .map(|(_, e)| u64::from(*e))
            .sum::<u64>()
            .max(1);
        for (unit, books) in &mut self.units {
            let available = pool.get(unit).copied().unwrap_or(0).min(books.reserve);
            for (id, e) in shares {
                let amount = available * u64::from(*e) / effort;
                if amount == 0 {
                    continue;
                }
                books.reserve -= amount;
                *books.alloc.entry(id.clone()).or_default() += amount;
                *books.granted.entry(id.clone()).or_default() += amount;
                movements.push(Movement::new(Some(id), "grant", unit, amount));
            }
        }
        movements
    }

    /// Charges a milestone; a charge past its allocation draws a grant of the deficit from the
    /// reserve, and what the reserve cannot cover leaves the milestone exhausted.
    pub fn charge(&mut self, milestone: &str, spend: Spend) -> Charged {
        let mut movements = Vec::new();
        let mut exhausted = None;
        let mut fraction: f64 = 0.0;
        for (unit, books) in &mut self.units {
            let amount = unit_amount(spend, unit);
            if amount > 0 {
                *books.spent.entry(milestone.to_string()).or_default() += amount;
                movements.push(Movement::new(Some(milestone), "charge", unit, amount));
            }
            let alloc = books.alloc.get(milestone).copied().unwrap_or(0);
            let spent = books.spent.get(milestone).copied().unwrap_or(0);
            if spent > alloc {
                let grant = (spent - alloc).min(books.reserve);
                if grant > 0 {
                    books.reserve -= grant;
                    *books.alloc.entry(milestone.to_string()).or_default() += grant;
                    *books.granted.entry(milestone.to_string()).or_default() += grant;
                    movements.push(Movement::new(Some(milestone), "grant", unit, grant));
                }
                if spent > alloc + grant && exhausted.is_none() {
                    exhausted = Some(unit.clone());
                }
            }
            fraction = fraction.max(books.fraction(milestone));
        }
        Charged {
            movements,
            fraction,
            exhausted,
        }
    }

    /// Returns a finished milestone's unspent allocation to the reserve.
    pub fn release(&mut self, milestone: &str) -> Vec<Movement> {
        let mut movements = Vec::new();
        for (unit, books) in &mut self.units {
            let alloc = books.alloc.get(milestone).copied().unwrap_or(0);
            let spent = books.spent.get(milestone).copied().unwrap_or(0);
            if alloc > spent {
                let unspent = alloc - spent;
                books.reserve += unspent;
                books.alloc.insert(milestone.to_string(), spent);
                *books.returned.entry(milestone.to_string()).or_default() += unspent;
                movements.push(Movement::new(Some(milestone), "return", unit, unspent));
            }
        }
        movements
    }

    pub fn fraction(&self, milestone: &str) -> f64 {
        self.units
            .values()
            .map(|books| books.fraction(milestone))
            .fold(0.0, f64::max)
    }

    /// What is left of a milestone's allocation, per unit.
    pub fn remaining(&self, milestone: &str) -> Spend {
        let left = |unit: &str| {
            self.units
                .get(unit)
                .map(|b| {
                    let alloc = b.alloc.get(milestone).copied().unwrap_or(0);
                    alloc.saturating_sub(b.spent.get(milestone).copied().unwrap_or(0))
                })
                .unwrap_or(0)
        };
        Spend {
            tokens: left("tokens"),
            tool_calls: left("tool_calls"),
            wall_ms: left("wall_ms"),
        }
    }

    /// The ledger as reported in plan versions and results.
    pub fn summary(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Turns movements into ledger entries and one event each (`ledger.<kind>`).
pub fn persist(movements: &[Movement], source: &str, record: &mut Record) {
    for m in movements {
        record.ledger.push(NewLedgerEntry {
            milestone_id: m.milestone_id.clone(),
            kind: m.kind.clone(),
            unit: m.unit.clone(),
            amount: i64::try_from(m.amount).unwrap_or(i64::MAX),
        });
        record.push(
            &format!("ledger.{}", m.kind),
            json!({"milestone": m.milestone_id, "unit": m.unit, "amount": m.amount, "source": source}),
        );
    }
}

/// Charges `spend` to `milestone` (or, with `None`, to the task's overhead: gate, planning,
/// the goal verifier) and records the movements. Returns the charge for the monitor.
pub fn charge(
    state: &mut TaskState,
    milestone: Option<&str>,
    spend: Spend,
    source: &str,
    record: &mut Record,
) -> Option<Charged> {
    match (milestone, state.ledger.as_mut()) {
        (Some(milestone), Some(book)) => {
            let charged = book.charge(milestone, spend);
            state.run_mut(milestone).spend.add(spend);
            persist(&charged.movements, source, record);
            Some(charged)
        }
        _ => {
            state.overhead.add(spend);
            let movements: Vec<Movement> = UNITS
                .iter()
                .map(|unit| Movement::new(None, "charge", unit, unit_amount(spend, unit)))
                .filter(|m| m.amount > 0)
                .collect();
            persist(&movements, source, record);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend(tokens: u64) -> Spend {
        Spend {
            tokens,
            ..Spend::default()
        }
    }

    #[test]
    fn the_seed_worked_example_holds_exactly() {
        let budget = Budget {
            tokens: 200_000,
            tool_calls: 100,
            wall_ms: 600_000,
        };
        let shares: Vec<(String, u32)> = [("m1", 1), ("m2", 2), ("m3", 2), ("m4", 2)]
            .iter()
            .map(|(id, e)| (id.to_string(), *e))
            .collect();
        let (mut book, _) = LedgerBook::allocate(&budget, &shares, 0.2);
        let tokens = &book.units["tokens"];
        assert_eq!(tokens.reserve, 40_000);
        assert_eq!(tokens.alloc["m1"], 22_857);
        assert_eq!(tokens.alloc["m4"], 45_714);
        book.charge("m1", spend(9_000));
        book.release("m1");
        assert_eq!(book.units["tokens"].reserve, 53_857);
        for m in ["m2", "m3"] {
            book.charge(m, spend(44_500));
            book.release(m);
        }
        let charged = book.charge("m4", spend(52_000));
        assert_eq!(charged.exhausted, None);
        assert_eq!(book.units["tokens"].granted["m4"], 6_286);
        let spent: u64 = book.units["tokens"].spent.values().sum();
        assert_eq!(spent, 150_000);
    }

    #[test]
    fn an_empty_reserve_exhausts() {
        let budget = Budget {
            tokens: 100,
            tool_calls: 10,
            wall_ms: 1000,
        };
        let (mut book, _) = LedgerBook::allocate(&budget, &[("a".into(), 1)], 0.2);
        let charged = book.charge("a", spend(90));
        assert_eq!(charged.exhausted, None);
        assert!(charged.fraction >= 1.0);
        let charged = book.charge("a", spend(20));
        assert_eq!(charged.exhausted.as_deref(), Some("tokens"));
    }
}
