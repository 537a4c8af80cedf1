//! The metric families one server keeps, their labels and their registration.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StrategyLabels {
    pub(super) strategy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EndLabels {
    pub(super) status: String,
    pub(super) strategy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ModelLabels {
    pub(super) purpose: String,
    pub(super) model: String,
    pub(super) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TokenLabels {
    pub(super) purpose: String,
    pub(super) model: String,
    pub(super) direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ToolLabels {
    pub(super) tool: String,
    pub(super) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ToolNameLabels {
    pub(super) tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LevelLabels {
    pub(super) level: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RouteLabels {
    pub(super) route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct HttpLabels {
    pub(super) method: String,
    pub(super) route: String,
    pub(super) status: String,
}

fn seconds_histogram() -> Histogram {
    // 5 ms to about 80 s: a simulated call to a slow local model's answer.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

pub(super) type Timed<L> = Family<L, Histogram, fn() -> Histogram>;

pub(super) struct Inner {
    pub(super) registry: Registry,
    pub(super) tasks_submitted: Family<StrategyLabels, Counter>,
    pub(super) tasks_finished: Family<EndLabels, Counter>,
    pub(super) steps: Family<OutcomeLabels, Counter>,
    pub(super) step_seconds: Timed<ToolNameLabels>,
    pub(super) model_calls: Family<ModelLabels, Counter>,
    pub(super) model_tokens: Family<TokenLabels, Counter>,
    pub(super) tool_calls: Family<ToolLabels, Counter>,
    pub(super) repairs: Family<LevelLabels, Counter>,
    pub(super) gate: Family<RouteLabels, Counter>,
    pub(super) lease_reclaims: Counter,
    pub(super) sse_subscribers: Gauge,
    pub(super) db_pool_in_use: Gauge,
    pub(super) http_requests: Family<HttpLabels, Counter>,
}

impl Inner {
    /// Every family, registered under its name and help text.
    pub(super) fn registered() -> Inner {
        let mut registry = Registry::default();
        let inner = Inner {
            tasks_submitted: Family::default(),
            tasks_finished: Family::default(),
            steps: Family::default(),
            step_seconds: Timed::new_with_constructor(seconds_histogram as fn() -> Histogram),
            model_calls: Family::default(),
            model_tokens: Family::default(),
            tool_calls: Family::default(),
            repairs: Family::default(),
            gate: Family::default(),
            lease_reclaims: Counter::default(),
            sse_subscribers: Gauge::default(),
            db_pool_in_use: Gauge::default(),
            http_requests: Family::default(),
            registry: Registry::default(),
        };
        inner.register(&mut registry);
        Inner { registry, ..inner }
    }

    fn register(&self, r: &mut Registry) {
        r.register(
            "cairn_tasks_submitted",
            "Tasks accepted, by strategy",
            self.tasks_submitted.clone(),
        );
        r.register(
            "cairn_tasks_finished",
            "Tasks that ended, by status and strategy",
            self.tasks_finished.clone(),
        );
        r.register(
            "cairn_steps",
            "Steps (tool calls the engine made) that finished, by outcome",
            self.steps.clone(),
        );
        r.register(
            "cairn_step_duration_seconds",
            "How long each tool call took, by tool",
            self.step_seconds.clone(),
        );
        r.register(
            "cairn_model_calls",
            "Model calls, by purpose, model and outcome",
            self.model_calls.clone(),
        );
        r.register(
            "cairn_model_tokens",
            "Model tokens, by purpose, model and direction",
            self.model_tokens.clone(),
        );
        r.register(
            "cairn_tool_calls",
            "Tool calls, by tool and outcome",
            self.tool_calls.clone(),
        );
        r.register(
            "cairn_repairs",
            "Rungs of the repair ladder taken, by level",
            self.repairs.clone(),
        );
        r.register(
            "cairn_gate_decisions",
            "The gate's decisions, by route",
            self.gate.clone(),
        );
        r.register(
            "cairn_lease_reclaims",
            "Expired leases this server's reaper took back",
            self.lease_reclaims.clone(),
        );
        r.register(
            "cairn_sse_subscribers",
            "Event streams open now",
            self.sse_subscribers.clone(),
        );
        r.register(
            "cairn_db_pool_in_use",
            "Database connections in use at the scrape",
            self.db_pool_in_use.clone(),
        );
        r.register(
            "cairn_http_requests",
            "HTTP requests, by method, route and status",
            self.http_requests.clone(),
        );
    }
}
