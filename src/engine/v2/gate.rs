//! The plan-or-act gate, wired: features from the gate model (or a heuristic when it cannot
//! answer), the rules, and the decision stored as a `gate.decided` event with its features.
//!
//! Rules (first seed, ARCHITECTURE §6): writes or several targets -> plan; at most
//! `direct_max_tool_calls` estimated calls and a direct success rate for the goal kind of at
//! least `direct_min_success` -> direct; else plan. The success rate comes from this tenant's
//! earlier direct-routed tasks of the same kind (their results record the outcome); with too
//! little history the configured prior stands in. Any side-effecting tool the model expects to
//! use counts as a write, so the gate leans to planning whenever side effects are involved.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::checkpoint::Record;
use super::context::Cx;
use super::ledger;
use super::ports::Purpose;
use crate::domain::task::{Strategy, TaskStatus};
use crate::engine::Halt;
use crate::store::TaskQuery;

pub const GATE_DECIDED: &str = "gate.decided";
pub const GATE_OUTCOME: &str = "gate.outcome";

const PROMPT: &str = "Estimate, for the goal, the features of a plan-or-act decision. Answer only \
JSON {\"est_tool_calls\": int, \"touches_writes\": bool, \"targets\": int, \"goal_kind\": string}.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    Direct,
    Plan,
}

/// The features the rules read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Features {
    pub est_tool_calls: u32,
    pub touches_writes: bool,
    pub targets: u32,
    #[serde(default = "default_kind")]
    pub goal_kind: String,
}

fn default_kind() -> String {
    "unknown".into()
}

/// Crude features from the goal text, used when the gate model gives none.
pub fn heuristic(goal: &str) -> Features {
    let lower = goal.to_lowercase();
    const WRITES: [&str; 12] = [
        "deploy", "delete", "send", "pay", "rename", "patch", "edit", "write", "remove", "update",
        "create", "publish",
    ];
    let touches_writes = lower
        .split(|c: char| !c.is_alphanumeric())
        .any(|word| WRITES.iter().any(|w| word.starts_with(w)));
    let commas = lower.matches(',').count() as u32;
    let ands = lower.matches(" and ").count() as u32;
    let targets = if commas + ands > 0 {
        commas + ands + 1
    } else {
        1
    };
    Features {
        est_tool_calls: if touches_writes { 5 } else { 1 },
        touches_writes,
        targets,
        goal_kind: if touches_writes { "change" } else { "lookup" }.into(),
    }
}

/// The rules. Returns the route and the reasons that decided it.
pub fn route(
    features: &Features,
    direct_rate: f64,
    config: &super::V2Config,
) -> (Route, Vec<String>) {
    let mut reasons = Vec::new();
    if features.touches_writes {
        reasons.push("touches writes".to_string());
    }
    if features.targets > 1 {
        reasons.push(format!("{} targets", features.targets));
    }
    if !reasons.is_empty() {
        return (Route::Plan, reasons);
    }
    if features.est_tool_calls <= config.direct_max_tool_calls
        && direct_rate >= config.direct_min_success
    {
        return (
            Route::Direct,
            vec![format!(
                "{} estimated tool call(s), direct success rate {direct_rate:.2} for {}",
                features.est_tool_calls, features.goal_kind
            )],
        );
    }
    (
        Route::Plan,
        vec![format!(
            "{} estimated tool call(s), direct success rate {direct_rate:.2}",
            features.est_tool_calls
        )],
    )
}

/// Decides the route of a task and records it. Strategies `direct` and `v2` force the route
/// (recorded as such); `auto` asks the gate.
pub async fn decide(cx: &Cx) -> Result<Route, Halt> {
    let task = cx.task().clone();
    let (route, record_value, spend) = match task.strategy {
        Strategy::Direct => (Route::Direct, json!({"source": "strategy"}), None),
        Strategy::Auto => {
            let asked = cx
                .ask(Purpose::Gate, None, 1, PROMPT, json!({"goal": task.goal}))
                .await;
            let (features, source) = match asked
                .reply
                .as_ref()
                .ok()
                .and_then(|r| serde_json::from_value::<Features>(r.value.clone()).ok())
            {
                Some(features) => (features, "model"),
                None => (heuristic(&task.goal), "heuristic"),
            };
            let rate = direct_success_rate(cx, &features.goal_kind).await;
            let (route, reasons) = route(&features, rate.0, &cx.config);
            (
                route,
                json!({"source": source, "features": features, "reasons": reasons,
                       "direct_success_rate": rate.0, "history": rate.1}),
                Some(asked.spend),
            )
        }
        _ => (Route::Plan, json!({"source": "strategy"}), None),
    };
    let mut decision = record_value;
    decision["route"] = json!(route);
    decision["strategy"] = json!(task.strategy);
    cx.journal
        .record(|state| {
            let mut record = Record::default();
            if let Some(spend) = spend {
                ledger::charge(state, None, spend, "gate", &mut record);
            }
            state.gate = Some(decision.clone());
            state.phase = match route {
                Route::Direct => super::checkpoint::Phase::Direct,
                Route::Plan => super::checkpoint::Phase::Plan,
            };
            record.push(GATE_DECIDED, decision.clone());
            Ok((record, ()))
        })
        .await?;
    Ok(route)
}

/// The direct success rate for `kind` from this tenant's recent direct-routed tasks, and how
/// many there were. Below `direct_min_history` tasks the configured prior is used.
async fn direct_success_rate(cx: &Cx, kind: &str) -> (f64, usize) {
    let ctx = cx.journal.ctx();
    let query = TaskQuery {
        status: None,
        before: None,
        limit: 200,
    };
    let tasks = ctx
        .store
        .list_tasks(&ctx.task.tenant_id, &query)
        .await
        .unwrap_or_default();
    let outcomes: Vec<bool> = tasks
        .iter()
        .filter(|t| t.status.is_terminal() && t.id != ctx.task.id)
        .filter_map(|t| t.result.as_ref())
        .filter(|r| r.pointer("/gate/route") == Some(&Value::from("direct")))
        .filter(|r| r.pointer("/gate/features/goal_kind") == Some(&Value::from(kind)))
        .map(|r| r.get("status") == Some(&Value::from(TaskStatus::Succeeded.as_str())))
        .collect();
    if outcomes.len() < cx.config.direct_min_history {
        return (cx.config.direct_success_prior, outcomes.len());
    }
    let ok = outcomes.iter().filter(|o| **o).count();
    (ok as f64 / outcomes.len() as f64, outcomes.len())
}
