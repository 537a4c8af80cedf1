//! The plan-or-act gate: decide, before any planning, whether a goal needs a plan at all.
//!
//! Planning costs at least one model call and adds failure surface; for a one-tool question it is
//! pure overhead. The rules: side effects or several targets -> plan; few
//! estimated tool calls and a reliable direct path for this kind of goal -> direct; otherwise
//! plan. The gate is deliberately biased to planning, because a wasted plan costs tokens while a
//! skipped plan on a destructive task can cost much more. Every decision carries its features and
//! reasons so misroutes can be counted later.
//!
//! Features come from two sources, and the rules see both ([`combine`]): the `gate` model's
//! answer, when it gave one, and [`heuristic_features`], a deterministic keyword extractor over
//! the goal text and the registered side-effecting tools. Either source seeing side effects or
//! several targets is enough to plan, and the larger tool-call estimate counts, so a model that
//! misses a destructive verb cannot route the goal past planning.
//!
//! A goal neither source expects any tool call for (a knowledge question) goes direct: with no
//! tool to call and nothing to write there is nothing a plan could schedule, and the goal
//! verifier still judges the answer. An operator may send read-only goals of few estimated
//! calls direct until their kind's own record says otherwise (`cold_start_tool_calls`): on the
//! real 1.5B model the planned route verified 2 of 24 fair-suite tasks where the act loop
//! verified 19 of 25. Off by default: with the 0.5B model the direct route answered a one-call
//! lookup with the wrong owner and its verifier passed it, a false success the planned route
//! does not make.
//! Otherwise a goal of calls needs a record: the direct success rate of its kind is estimated with a
//! Beta prior ([`direct_estimate`]), by default worth two pseudo-outcomes at 0.5, so a kind with
//! no direct outcomes reads 0.5 (below the 0.9 needed) and earns the direct route with its own
//! successes (8 of 8 reach 0.9).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a set of features came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FeatureSource {
    #[default]
    Model,
    Heuristic,
    Combined,
}

/// Past outcomes of direct-routed tasks of one goal kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct DirectHistory {
    pub successes: u64,
    pub total: u64,
}

/// What the rules look at. The first four fields are the gate model's output shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GateFeatures {
    pub est_tool_calls: u32,
    pub touches_writes: bool,
    pub targets: u32,
    pub goal_kind: String,
    /// Filled in by the engine from the stats of this goal kind.
    #[serde(default)]
    pub direct_history: Option<DirectHistory>,
    #[serde(default)]
    pub source: FeatureSource,
}

impl GateFeatures {
    /// Combines two feature sets towards planning: side effects if either sees them, the larger
    /// target and tool-call estimates, the first one's goal kind and history.
    pub fn biased_with(self, other: &GateFeatures) -> GateFeatures {
        GateFeatures {
            est_tool_calls: self.est_tool_calls.max(other.est_tool_calls),
            touches_writes: self.touches_writes || other.touches_writes,
            targets: self.targets.max(other.targets),
            source: FeatureSource::Combined,
            ..self
        }
    }
}

/// What the rules see of one goal: the model's features (when it answered), the heuristic's,
/// and their combination. The checkpoint, the result and the `gate.decided` event keep all
/// three, so a misroute can be traced to the source that missed it.
pub fn combine(model: Option<&GateFeatures>, heuristic: &GateFeatures) -> GateFeatures {
    match model {
        Some(model) => model.clone().biased_with(heuristic),
        // Without the model's estimate, "no action verb" is not "no tool call": at least one.
        None => GateFeatures {
            est_tool_calls: heuristic.est_tool_calls.max(1),
            ..heuristic.clone()
        },
    }
}

/// The gate's thresholds (defaults as in docs/architecture.md, "The engine").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GateThresholds {
    /// At most this many estimated tool calls may go direct.
    pub max_direct_tool_calls: u32,
    /// A read-only goal estimated at this many tool calls or fewer goes direct until its
    /// kind's own direct record falls below `min_direct_success` (no prior weighs in).
    pub cold_start_tool_calls: u32,
    /// The direct path must have succeeded at least this often for the goal kind.
    pub min_direct_success: f64,
    /// The prior mean of a goal kind's direct success rate (Beta prior)...
    pub prior_direct_success: f64,
    /// ...worth this many pseudo-outcomes.
    pub prior_weight: f64,
}

impl Default for GateThresholds {
    fn default() -> Self {
        Self {
            max_direct_tool_calls: 3,
            cold_start_tool_calls: 0,
            min_direct_success: 0.9,
            prior_direct_success: 0.5,
            prior_weight: 2.0,
        }
    }
}

/// The direct success rate of a goal kind: the posterior mean of a Beta prior with mean
/// `prior_direct_success` and weight `prior_weight` after `history`, i.e.
/// `(successes + prior * weight) / (total + weight)`. With no outcomes (and no weight) it is the
/// prior. The second value says whether any history went into it.
pub fn direct_estimate(history: Option<DirectHistory>, thresholds: &GateThresholds) -> (f64, bool) {
    let h = history.unwrap_or_default();
    let prior = thresholds.prior_direct_success.clamp(0.0, 1.0);
    let weight = thresholds.prior_weight.max(0.0);
    let successes = h.successes.min(h.total) as f64;
    let total = h.total as f64;
    let rate = if total + weight > 0.0 {
        (successes + prior * weight) / (total + weight)
    } else {
        prior
    };
    (rate, h.total > 0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    Direct,
    Plan,
}

/// Why the gate routed as it did, one entry per rule that fired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum GateReason {
    TouchesWrites,
    /// Neither source expects a tool call (and none expects a write): there is nothing a plan
    /// could schedule, so the goal goes direct whatever the history; the verifier still judges
    /// the answer.
    NothingToPlan,
    MultipleTargets {
        targets: u32,
    },
    TooManyToolCalls {
        estimated: u32,
        max: u32,
    },
    FewToolCalls {
        estimated: u32,
        max: u32,
    },
    /// A read-only goal of few calls whose kind has no direct record yet: it goes direct, and
    /// its outcome starts the record.
    ColdStart {
        estimated: u32,
        max: u32,
    },
    DirectUnreliable {
        success_rate: f64,
        min: f64,
        from_history: bool,
    },
    DirectReliable {
        success_rate: f64,
        min: f64,
        from_history: bool,
    },
}

/// The gate's decision, stored with the task so it can be linked to the outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GateDecision {
    pub route: Route,
    pub reasons: Vec<GateReason>,
    pub features: GateFeatures,
}

/// What the engine records of a routing decision (the checkpoint's `gate`, the result's `gate`
/// and the `gate.decided` event): the route, the strategy that asked, and for `auto` the rules'
/// reasons, the combined features they saw (`features`) and each source's own (`model`, absent
/// when the model gave no usable answer, and `heuristic`). A route forced by the strategy has
/// `source: "strategy"`; a forced `direct` route keeps the heuristic's features, so its outcome
/// counts in the direct history of the goal kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRecord {
    pub route: Route,
    pub strategy: super::task::Strategy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<GateReason>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<GateFeatures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<GateFeatures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heuristic: Option<GateFeatures>,
}

/// The features one `auto` decision saw, by source.
#[derive(Debug, Clone, PartialEq)]
pub struct GateSources {
    pub model: Option<GateFeatures>,
    pub heuristic: GateFeatures,
}

impl GateRecord {
    /// A route the task's strategy forced (`direct`, `v2`), with the heuristic's features when
    /// they were computed.
    pub fn forced(
        route: Route,
        strategy: super::task::Strategy,
        heuristic: Option<GateFeatures>,
    ) -> GateRecord {
        GateRecord {
            route,
            strategy,
            source: Some("strategy".into()),
            reasons: None,
            features: heuristic.clone(),
            model: None,
            heuristic,
        }
    }

    /// The rules' decision for an `auto` task, with the features of each source.
    pub fn decided(
        decision: GateDecision,
        strategy: super::task::Strategy,
        sources: GateSources,
    ) -> GateRecord {
        GateRecord {
            route: decision.route,
            strategy,
            source: None,
            reasons: Some(decision.reasons),
            features: Some(decision.features),
            model: sources.model,
            heuristic: Some(sources.heuristic),
        }
    }
}

/// Applies the rules. Side effects and several targets are checked first and always plan.
pub fn route(features: GateFeatures, thresholds: &GateThresholds) -> GateDecision {
    let mut reasons = Vec::new();
    if features.touches_writes {
        reasons.push(GateReason::TouchesWrites);
    }
    if features.targets > 1 {
        reasons.push(GateReason::MultipleTargets {
            targets: features.targets,
        });
    }
    if !reasons.is_empty() {
        return GateDecision {
            route: Route::Plan,
            reasons,
            features,
        };
    }
    if features.est_tool_calls == 0 {
        return GateDecision {
            route: Route::Direct,
            reasons: vec![GateReason::NothingToPlan],
            features,
        };
    }
    if features.est_tool_calls <= thresholds.cold_start_tool_calls {
        return few_reads(features, thresholds);
    }
    let (estimated, max) = (features.est_tool_calls, thresholds.max_direct_tool_calls);
    let few = estimated <= max;
    reasons.push(if few {
        GateReason::FewToolCalls { estimated, max }
    } else {
        GateReason::TooManyToolCalls { estimated, max }
    });
    let (success_rate, from_history) = direct_estimate(features.direct_history, thresholds);
    let min = thresholds.min_direct_success;
    let reliable = success_rate >= min;
    reasons.push(if reliable {
        GateReason::DirectReliable {
            success_rate,
            min,
            from_history,
        }
    } else {
        GateReason::DirectUnreliable {
            success_rate,
            min,
            from_history,
        }
    });
    let route = if few && reliable {
        Route::Direct
    } else {
        Route::Plan
    };
    GateDecision {
        route,
        reasons,
        features,
    }
}

/// A read-only goal of at most `cold_start_tool_calls` calls: direct with no record, then
/// as long as its kind's own direct success rate holds `min_direct_success`.
fn few_reads(features: GateFeatures, thresholds: &GateThresholds) -> GateDecision {
    let (estimated, max) = (features.est_tool_calls, thresholds.cold_start_tool_calls);
    let Some(history) = features.direct_history.filter(|h| h.total > 0) else {
        return GateDecision {
            route: Route::Direct,
            reasons: vec![GateReason::ColdStart { estimated, max }],
            features,
        };
    };
    let success_rate = history.successes.min(history.total) as f64 / history.total as f64;
    let min = thresholds.min_direct_success;
    let reliable = success_rate >= min;
    let judged = if reliable {
        GateReason::DirectReliable {
            success_rate,
            min,
            from_history: true,
        }
    } else {
        GateReason::DirectUnreliable {
            success_rate,
            min,
            from_history: true,
        }
    };
    GateDecision {
        route: if reliable { Route::Direct } else { Route::Plan },
        reasons: vec![GateReason::FewToolCalls { estimated, max }, judged],
        features,
    }
}

mod heuristic;
pub use heuristic::{goal_targets, heuristic_features, unquoted};

#[cfg(test)]
mod tests;
