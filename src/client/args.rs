//! The client's own argument values, parsed for clap: a bad one is a usage error (exit 2) in
//! plain words, before anything is sent.

use cairn::domain::approval::ApprovalMode;
use cairn::domain::task::{Strategy, TaskStatus};
use serde_json::{Map, Value, json};

/// `--budget tokens=N,tool_calls=N,wall_ms=N`: any subset; a unit left out is the server's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetArg {
    pub tokens: Option<u64>,
    pub tool_calls: Option<u64>,
    pub wall_ms: Option<u64>,
}

impl BudgetArg {
    /// The `budget` object of the request: only the units given.
    pub fn to_json(self) -> Value {
        let mut object = Map::new();
        for (name, value) in [
            ("tokens", self.tokens),
            ("tool_calls", self.tool_calls),
            ("wall_ms", self.wall_ms),
        ] {
            if let Some(value) = value {
                object.insert(name.to_string(), json!(value));
            }
        }
        Value::Object(object)
    }
}

const UNITS: &str = "tokens, tool_calls, wall_ms";

pub fn parse_budget(text: &str) -> Result<BudgetArg, String> {
    let mut budget = BudgetArg::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((unit, amount)) = part.split_once('=') else {
            return Err(format!(
                "{part:?} is not UNIT=NUMBER (the units are {UNITS}), e.g. tokens=20000,tool_calls=10"
            ));
        };
        let unit = unit.trim();
        let amount = amount.trim();
        let number = match amount.replace('_', "").parse::<u64>() {
            Ok(number) if number > 0 => number,
            _ => {
                return Err(format!(
                    "the {unit} budget must be a whole number above 0, got {amount:?}"
                ));
            }
        };
        let slot = match unit {
            "tokens" => &mut budget.tokens,
            "tool_calls" => &mut budget.tool_calls,
            "wall_ms" => &mut budget.wall_ms,
            other => {
                return Err(format!(
                    "{other:?} is not a budget unit; the units are {UNITS}"
                ));
            }
        };
        if slot.is_some() {
            return Err(format!("the {unit} budget is given twice"));
        }
        *slot = Some(number);
    }
    if budget == BudgetArg::default() {
        return Err(format!(
            "the budget names no unit; give UNIT=NUMBER for some of {UNITS}, or leave --budget \
             out for the server's default"
        ));
    }
    Ok(budget)
}

pub fn parse_strategy(text: &str) -> Result<Strategy, String> {
    Strategy::parse(text.trim()).ok_or_else(|| {
        let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.as_str()).collect();
        format!(
            "{text:?} is not a strategy; the strategies are {}",
            names.join(", ")
        )
    })
}

pub fn parse_approval(text: &str) -> Result<ApprovalMode, String> {
    ApprovalMode::parse(text.trim())
        .ok_or_else(|| format!("{text:?} is not an approval mode; the modes are none, plan, steps"))
}

pub fn parse_status(text: &str) -> Result<String, String> {
    match TaskStatus::parse(text.trim()) {
        Some(status) => Ok(status.as_str().to_string()),
        None => {
            let names: Vec<&str> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
            Err(format!(
                "{text:?} is not a task status; the statuses are {}",
                names.join(", ")
            ))
        }
    }
}

/// `--tools a,b`: registered tool names (the server refuses one it does not know).
pub fn parse_tools(text: &str) -> Result<ToolList, String> {
    let names: Vec<String> = text
        .split(',')
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        return Err("no tool named; give names separated by commas, e.g. lookup,write_note".into());
    }
    Ok(ToolList(names))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolList(pub Vec<String>);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn a_budget_takes_any_subset_of_units() {
        let budget = parse_budget("tokens=20000, wall_ms=60_000").unwrap();
        assert_eq!(budget.to_json(), json!({"tokens": 20000, "wall_ms": 60000}));
        let full = parse_budget("tokens=1,tool_calls=2,wall_ms=3").unwrap();
        assert_eq!(full.tool_calls, Some(2));
    }

    #[test]
    fn a_bad_budget_is_named_in_words() {
        let unknown = parse_budget("dollars=5").unwrap_err();
        assert!(unknown.contains("not a budget unit"), "{unknown}");
        let word = parse_budget("tokens=many").unwrap_err();
        assert!(word.contains("whole number"), "{word}");
        assert!(parse_budget("tokens=0").is_err());
        assert!(parse_budget("tokens").is_err());
        assert!(parse_budget("tokens=1,tokens=2").is_err());
        assert!(parse_budget("").is_err());
    }

    #[test]
    fn strategies_and_statuses_are_the_servers() {
        assert_eq!(parse_strategy("one_shot").unwrap(), Strategy::OneShot);
        assert_eq!(parse_strategy("v2").unwrap(), Strategy::V2);
        assert!(parse_strategy("fast").unwrap_err().contains("auto"));
        assert_eq!(
            parse_status("budget_exhausted").unwrap(),
            "budget_exhausted"
        );
        assert!(parse_status("done").is_err());
        assert_eq!(parse_tools("lookup, write_note").unwrap().0.len(), 2);
        assert!(parse_tools(" , ").is_err());
    }
}
