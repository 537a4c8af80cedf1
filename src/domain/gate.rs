//! The plan-or-act gate: decide, before any planning, whether a goal needs a plan at all.
//!
//! Planning costs at least one model call and adds failure surface; for a one-tool question it is
//! pure overhead. The rules are the first seed's: side effects or several targets -> plan; few
//! estimated tool calls and a reliable direct path for this kind of goal -> direct; otherwise
//! plan. The gate is deliberately biased to planning, because a wasted plan costs tokens while a
//! skipped plan on a destructive task can cost much more. Every decision carries its features and
//! reasons so misroutes can be counted later.
//!
//! Features come from the `gate` model when one is configured, or from [`heuristic_features`],
//! a keyword extractor over the goal text. [`GateFeatures::biased_with`] combines the two so
//! that either source seeing side effects or several targets is enough to plan.

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

/// The gate's thresholds (ARCHITECTURE §6 defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GateThresholds {
    /// At most this many estimated tool calls may go direct.
    pub max_direct_tool_calls: u32,
    /// The direct path must have succeeded at least this often for the goal kind.
    pub min_direct_success: f64,
    /// Fewer direct outcomes than this and the history is not trusted yet...
    pub min_history: u64,
    /// ...and this prior success rate is used instead.
    pub prior_direct_success: f64,
}

impl Default for GateThresholds {
    fn default() -> Self {
        Self {
            max_direct_tool_calls: 3,
            min_direct_success: 0.9,
            min_history: 10,
            prior_direct_success: 0.9,
        }
    }
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
/// reasons and the features they saw. A route forced by the strategy has `source: "strategy"`.
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
}

impl GateRecord {
    /// A route the task's strategy forced (`direct`, `v2`).
    pub fn forced(route: Route, strategy: super::task::Strategy) -> GateRecord {
        GateRecord {
            route,
            strategy,
            source: Some("strategy".into()),
            reasons: None,
            features: None,
        }
    }

    /// The rules' decision for an `auto` task.
    pub fn decided(decision: GateDecision, strategy: super::task::Strategy) -> GateRecord {
        GateRecord {
            route: decision.route,
            strategy,
            source: None,
            reasons: Some(decision.reasons),
            features: Some(decision.features),
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
    let (estimated, max) = (features.est_tool_calls, thresholds.max_direct_tool_calls);
    let few = estimated <= max;
    reasons.push(if few {
        GateReason::FewToolCalls { estimated, max }
    } else {
        GateReason::TooManyToolCalls { estimated, max }
    });
    let (success_rate, from_history) = match features.direct_history {
        Some(h) if h.total >= thresholds.min_history && h.total > 0 => {
            (h.successes as f64 / h.total as f64, true)
        }
        _ => (thresholds.prior_direct_success, false),
    };
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

#[path = "gate_heuristic.rs"]
mod heuristic;
pub use heuristic::heuristic_features;

#[cfg(test)]
mod tests {
    use super::*;

    fn features(est: u32, writes: bool, targets: u32) -> GateFeatures {
        GateFeatures {
            est_tool_calls: est,
            touches_writes: writes,
            targets,
            goal_kind: "lookup".into(),
            direct_history: None,
            source: FeatureSource::Model,
        }
    }

    #[test]
    fn parses_the_gate_model_output() {
        let f: GateFeatures = serde_json::from_str(
            r#"{"est_tool_calls": 1, "touches_writes": false, "targets": 1, "goal_kind": "lookup"}"#,
        )
        .unwrap();
        assert_eq!(f, features(1, false, 1));
    }

    #[test]
    fn side_effects_and_several_targets_plan() {
        let t = GateThresholds::default();
        let d = route(features(1, true, 1), &t);
        assert_eq!(
            (d.route, d.reasons),
            (Route::Plan, vec![GateReason::TouchesWrites])
        );
        let d = route(features(1, false, 3), &t);
        assert_eq!(
            (d.route, d.reasons),
            (
                Route::Plan,
                vec![GateReason::MultipleTargets { targets: 3 }]
            )
        );
        assert_eq!(route(features(9, true, 2), &t).reasons.len(), 2);
    }

    #[test]
    fn a_simple_reliable_read_goes_direct() {
        let t = GateThresholds::default();
        let d = route(features(3, false, 1), &t);
        assert_eq!(d.route, Route::Direct);
        assert_eq!(
            d.reasons,
            vec![
                GateReason::FewToolCalls {
                    estimated: 3,
                    max: 3
                },
                GateReason::DirectReliable {
                    success_rate: 0.9,
                    min: 0.9,
                    from_history: false
                },
            ]
        );
        assert_eq!(route(features(4, false, 1), &t).route, Route::Plan);
    }

    #[test]
    fn history_decides_once_there_is_enough_of_it() {
        let t = GateThresholds::default();
        let with = |successes, total| GateFeatures {
            direct_history: Some(DirectHistory { successes, total }),
            ..features(1, false, 1)
        };
        assert_eq!(route(with(8, 10), &t).route, Route::Plan);
        assert_eq!(route(with(9, 10), &t).route, Route::Direct);
        // Too little history: the prior (0.9) stands in.
        assert_eq!(route(with(0, 3), &t).route, Route::Direct);
        let cautious = GateThresholds {
            prior_direct_success: 0.5,
            ..t
        };
        assert_eq!(route(with(0, 3), &cautious).route, Route::Plan);
        assert!(matches!(
            route(with(5, 10), &t).reasons[1],
            GateReason::DirectUnreliable {
                from_history: true,
                ..
            }
        ));
    }

    #[test]
    fn combining_sources_biases_to_plan() {
        let model = features(1, false, 1);
        let heuristic = GateFeatures {
            source: FeatureSource::Heuristic,
            ..features(2, true, 1)
        };
        let both = model.biased_with(&heuristic);
        assert!(both.touches_writes);
        assert_eq!(
            (both.est_tool_calls, both.source),
            (2, FeatureSource::Combined)
        );
        assert_eq!(route(both, &GateThresholds::default()).route, Route::Plan);
    }
}
