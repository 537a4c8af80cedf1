//! The engine's settings: the parameters of the domain's rules (the ledger's reserve and repair
//! threshold, the repair ladder's limits, the gate's direct-route thresholds) and how many
//! milestones of one task run at once. Defaults are those of docs/architecture.md, "The engine" (a
//! 20% reserve, repair at 80% of an allocation, at most 3 calls and a 0.9 success rate to go
//! direct). Pure data, so the configuration can compose it without depending on the engine.

use serde::{Deserialize, Serialize};

/// The engine's settings; `[engine]` in the config file, a few also as `CAIRN_ENGINE_*`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSettings {
    /// Share of each unit held back for repair.
    pub reserve_frac: f64,
    /// Fraction of a milestone's allocation at which a failing check starts repair.
    pub pressure_frac: f64,
    pub max_retry_step: u32,
    pub max_replan_milestone: u32,
    pub max_replan_strategy: u32,
    /// Unchanged retries of one tool call after a transient fault (timeout, 5xx, 429, reset),
    /// before the tool counts as unavailable; they are L1 rungs that ask no planner.
    pub max_transient_retries: u32,
    /// Delay before the first transient retry; each further one doubles it.
    pub transient_backoff_ms: u64,
    /// Re-asks after an invalid plan or step list.
    pub max_reasks: u32,
    /// A repair proposal that repeats a failed step list is asked once more, sampled warmer,
    /// before the ladder escalates. Off by default: on the 1.5B model the warmer re-ask
    /// repeated the list 10 times out of 10, and the worked example (docs/scenarios.md)
    /// escalates at once.
    pub explore_repeats: bool,
    /// Milestones of one task running at once.
    pub max_parallel: usize,
    pub direct_max_tool_calls: u32,
    /// A read-only goal estimated at this many calls or fewer goes direct until its kind's own
    /// direct record falls below `direct_min_success` (0: every goal with a call needs a
    /// record).
    pub direct_cold_start_calls: u32,
    pub direct_min_success: f64,
    /// The prior mean of a goal kind's direct success rate (the gate's Beta prior): what a kind
    /// with no direct outcomes reads as. Below `direct_min_success` by default, so unknown kinds
    /// are planned.
    pub direct_success_prior: f64,
    /// The prior's weight in pseudo-outcomes (0: the prior alone decides until history exists,
    /// then history alone).
    pub direct_prior_weight: f64,
    /// Model rounds of the direct act loop.
    pub direct_max_rounds: u32,
    /// What a person must sign off before it runs (`[engine.approval]`).
    pub approval: crate::domain::approval::ApprovalPolicy,
    /// What calls cost: not an `[engine]` key but the `[prices]` table, resolved for the
    /// configured models by the composition root.
    #[serde(skip)]
    pub prices: crate::domain::price::Prices,
    /// What each tenant may spend per period: the `[spend_caps]` table, resolved by the
    /// composition root.
    #[serde(skip)]
    pub spend_caps: crate::domain::spend::SpendCaps,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            reserve_frac: 0.2,
            pressure_frac: 0.8,
            max_retry_step: 2,
            max_replan_milestone: 2,
            max_replan_strategy: 1,
            max_transient_retries: 2,
            transient_backoff_ms: 200,
            max_reasks: 2,
            explore_repeats: false,
            max_parallel: 4,
            direct_max_tool_calls: 3,
            direct_cold_start_calls: 0,
            direct_min_success: 0.9,
            direct_success_prior: 0.5,
            direct_prior_weight: 2.0,
            direct_max_rounds: 4,
            approval: crate::domain::approval::ApprovalPolicy::default(),
            prices: crate::domain::price::Prices::default(),
            spend_caps: crate::domain::spend::SpendCaps::default(),
        }
    }
}
