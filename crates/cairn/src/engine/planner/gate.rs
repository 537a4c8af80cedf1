//! The plan-or-act gate, wired: the gate model's features and the domain's deterministic
//! heuristic over the goal text and the side-effecting tools, combined towards planning
//! ([`crate::domain::gate::combine`]); the direct history of the goal kind; the domain's rules
//! ([`crate::domain::gate::route`]); and the decision stored as a `gate.decided` event with the
//! features of each source, the combined ones and the reasons. The task's result repeats the
//! decision next to the status it ended with, which is what `GET /v1/stats/gate` and later
//! decisions read.
//!
//! The history comes from this tenant's recent direct-routed tasks of the same kind (routed by
//! the gate, or forced with strategy `direct`, whose record keeps the heuristic's features);
//! a read-only goal of few calls goes direct until that record says otherwise, and for longer
//! goals the configured Beta prior weighs in, so a kind with no history reads below the
//! threshold.

use serde_json::{Value, json};

use crate::domain::event::kinds::GATE_DECIDED;
use crate::domain::gate::{
    DirectHistory, FeatureSource, GateFeatures, GateRecord, GateSources, GateThresholds, combine,
    heuristic_features, route,
};
use crate::domain::report::TaskReport;
use crate::domain::task::{Strategy, TaskStatus};
use crate::engine::Halt;
use crate::engine::runtime::attempt::{Asked, Attempt, Question};
use crate::engine::runtime::checkpoint::Record;
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::Purpose;
use crate::engine::{prompts, schemas};
use crate::store::TaskQuery;

pub use crate::domain::gate::Route;

/// The domain gate's thresholds from the engine's settings.
fn thresholds(config: &super::EngineSettings) -> GateThresholds {
    GateThresholds {
        max_direct_tool_calls: config.direct_max_tool_calls,
        cold_start_tool_calls: config.direct_cold_start_calls,
        min_direct_success: config.direct_min_success,
        prior_direct_success: config.direct_success_prior,
        prior_weight: config.direct_prior_weight,
    }
}

/// Decides the route of a task and records it. Strategies `direct` and `v2` force the route
/// (recorded as such); `auto` asks the gate.
pub async fn decide(cx: &Attempt) -> Result<Route, Halt> {
    let task = cx.task().clone();
    let heuristic = heuristic_features(&task.goal, &cx.writers());
    // The gate call's reservation is held until its charge is staged below.
    let (decision, spend, prompt, _hold) = match task.strategy {
        Strategy::Direct => (
            GateRecord::forced(Route::Direct, task.strategy, Some(heuristic)),
            None,
            None,
            None,
        ),
        Strategy::Auto => {
            let (asked, model) = ask_model(cx).await;
            let mut features = combine(model.as_ref(), &heuristic);
            features.direct_history = Some(direct_history(cx, &features.goal_kind).await);
            let decided = route(features, &thresholds(&cx.config));
            let sources = GateSources { model, heuristic };
            (
                GateRecord::decided(decided, task.strategy, sources),
                Some(asked.spend),
                Some(asked.prompt),
                asked.hold,
            )
        }
        _ => (
            GateRecord::forced(Route::Plan, task.strategy, None),
            None,
            None,
            None,
        ),
    };
    let route = decision.route;
    let event = serde_json::to_value(&decision).unwrap_or(Value::Null);
    // Staged: the plan (or the first direct round) that follows commits it.
    cx.journal
        .stage(|state| {
            let mut record = Record::default();
            if let Some(spend) = spend {
                ledger::charge(state, None, spend, "gate", &mut record)?;
            }
            state.gate = Some(decision.clone());
            state.phase = match route {
                Route::Direct => crate::engine::runtime::checkpoint::Phase::Direct,
                Route::Plan => crate::engine::runtime::checkpoint::Phase::Plan,
            };
            record.push(GATE_DECIDED, event);
            if let Some(prompt) = &prompt {
                record.prompted(prompt);
            }
            Ok((record, ()))
        })
        .await?;
    Ok(route)
}

/// Asks the gate model for the goal's features: the call, and its features when it answered.
async fn ask_model(cx: &Attempt) -> (Asked, Option<GateFeatures>) {
    let asked = cx
        .ask(Question {
            purpose: Purpose::Gate,
            milestone: None,
            attempt: 1,
            prompt: &prompts::GATE,
            input: json!({"goal": cx.task().goal}),
            turns: Vec::new(),
            schema: schemas::gate(),
        })
        .await;
    let model = asked
        .reply
        .as_ref()
        .ok()
        .and_then(|r| serde_json::from_value::<GateFeatures>(r.value.clone()).ok())
        .map(|features| GateFeatures {
            source: FeatureSource::Model,
            direct_history: None,
            ..features
        });
    (asked, model)
}

/// Asks the gate model about a goal whose route was forced (`v2`), so that the goal's features
/// are the gate's own, the model's and the heuristic's combined, as an `auto` decision sees
/// them. Used before a failed plan is handed to the direct route: the heuristic alone counts
/// only the verbs it knows, and the answer after a handover is judged on these features. When
/// the model gives no usable answer, or was asked already, the record stays as it is.
pub(super) async fn consult(cx: &Attempt) -> Result<(), Halt> {
    let asked_already = cx
        .journal
        .read(|s| s.gate.as_ref().is_none_or(|g| g.model.is_some()))
        .await;
    if asked_already {
        return Ok(());
    }
    let heuristic = heuristic_features(&cx.task().goal, &cx.writers());
    // The call's reservation is held until its charge is staged below.
    let (asked, model) = ask_model(cx).await;
    let combined = model.as_ref().map(|model| combine(Some(model), &heuristic));
    cx.journal
        .stage(|state| {
            let mut record = Record::default();
            ledger::charge(state, None, asked.spend, "gate", &mut record)?;
            record.prompted(&asked.prompt);
            if let (Some(gate), Some(combined)) = (state.gate.as_mut(), &combined) {
                gate.model.clone_from(&model);
                gate.heuristic = Some(heuristic.clone());
                gate.features = Some(combined.clone());
            }
            Ok((record, ()))
        })
        .await?;
    Ok(())
}

/// Whether the gate model was heard ([`consult`] or an `auto` decision) and, with the
/// heuristic, expects no tool call and no change: the goal is a knowledge question by the
/// gate's own standard.
pub(super) async fn model_agrees(cx: &Attempt) -> bool {
    let heard = cx
        .journal
        .read(|s| s.gate.as_ref().is_some_and(|g| g.model.is_some()))
        .await;
    heard && !needs_tools(cx).await
}

/// Outcomes of this tenant's recent direct-routed tasks of goal kind `kind` (their results
/// record the gate's decision and the status they ended with).
async fn direct_history(cx: &Attempt, kind: &str) -> DirectHistory {
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
        .map(|r| TaskReport::read(Some(r)))
        .filter(|r| r.route() == Some(Route::Direct) && r.goal_kind() == Some(kind))
        .map(|r| r.status == Some(TaskStatus::Succeeded))
        .collect();
    DirectHistory {
        successes: outcomes.iter().filter(|ok| **ok).count() as u64,
        total: outcomes.len() as u64,
    }
}

/// The goal's features: the gate's recorded ones, or the heuristic's when the route was
/// forced (`direct`, `v2`).
pub(super) async fn goal_features(cx: &Attempt) -> GateFeatures {
    let recorded = cx
        .journal
        .read(|s| s.gate.as_ref().and_then(|g| g.features.clone()))
        .await;
    recorded.unwrap_or_else(|| heuristic_features(&cx.task().goal, &cx.writers()))
}

/// Whether the goal needs tools (a tool call or a write, by [`goal_features`]). A first plan
/// with no milestone is declined only when this says no (`super::strategic`), so a declined
/// plan never meets the no-evidence rule.
pub(super) async fn needs_tools(cx: &Attempt) -> bool {
    expects_tools(&goal_features(cx).await)
}

/// Whether these features expect a tool call or a write.
pub(super) fn expects_tools(features: &GateFeatures) -> bool {
    features.est_tool_calls > 0 || features.touches_writes
}
