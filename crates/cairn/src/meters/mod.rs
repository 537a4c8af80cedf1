//! What one server has done, counted for `GET /metrics` (Prometheus, in the OpenMetrics text
//! format).
//!
//! [`Meters`] owns its registry: every server builds one and hands it to what records (the
//! API, the workers' commits, the model and tool ports, the reaper), so two servers in one
//! process never share figures and nothing is global. Labels are bounded sets an operator
//! controls (strategies, statuses, purposes, configured models, registered tools, route
//! templates); no task id or goal is ever a label.
//!
//! Most task figures come from the events a worker commits ([`Meters::committed`]), the same
//! record the API serves, so `/metrics` agrees with the events of the runs it counted.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::domain::event::{NewEvent, kinds};
use crate::domain::task::TaskStatus;

mod families;

use families::{
    EndLabels, HttpLabels, Inner, LevelLabels, ModelLabels, OutcomeLabels, RouteLabels,
    StrategyLabels, TokenLabels, ToolLabels, ToolNameLabels,
};

/// The media type `GET /metrics` answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One server's meters; cheap to clone (clones share the figures).
#[derive(Clone)]
pub struct Meters {
    inner: Arc<Inner>,
}

impl Default for Meters {
    fn default() -> Self {
        Meters::new()
    }
}

/// One model call as the model port saw it.
pub struct ModelCallRecord<'a> {
    pub purpose: &'a str,
    /// The model that answered, or the configured one when the call failed.
    pub model: &'a str,
    pub ok: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Meters {
    pub fn new() -> Meters {
        Meters {
            inner: Arc::new(Inner::registered()),
        }
    }

    /// The figures in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail; an error would leave the text cut short, not wrong.
        if let Err(error) =
            prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)
        {
            tracing::warn!(%error, "metrics could not be encoded");
        }
        text
    }

    pub fn task_submitted(&self, strategy: &str) {
        let labels = StrategyLabels {
            strategy: strategy.to_string(),
        };
        self.inner.tasks_submitted.get_or_create(&labels).inc();
    }

    /// What a worker's commit for a task of `strategy` will record, read from its events
    /// before the commit (which takes them) and counted once it applied ([`Tally::count`]).
    pub fn tally(&self, strategy: &str, events: &[NewEvent]) -> Tally {
        let mut noted = Vec::new();
        for event in events {
            let text = |field: &str| {
                let value = event.data.get(field).and_then(Value::as_str);
                value.unwrap_or("unknown").to_string()
            };
            if let Some(status) = kinds::terminal_status(&event.kind) {
                noted.push(Noted::End(status));
                continue;
            }
            match event.kind.as_str() {
                kinds::STEP_FINISHED => {
                    let ok = event.data.get("ok").and_then(Value::as_bool) == Some(true);
                    noted.push(Noted::Step { ok });
                }
                kinds::REPAIR_STARTED => noted.push(Noted::Repair(text("level"))),
                kinds::GATE_DECIDED => noted.push(Noted::Gate(text("route"))),
                _ => {}
            }
        }
        Tally {
            meters: self.clone(),
            strategy: strategy.to_string(),
            noted,
        }
    }

    /// [`Meters::tally`] and [`Tally::count`] at once, for events already committed.
    pub fn committed(&self, strategy: &str, events: &[NewEvent]) {
        self.tally(strategy, events).count();
    }

    /// A task that ended outside an engine (a client cancelled it).
    pub fn task_ended(&self, status: TaskStatus, strategy: &str) {
        let labels = EndLabels {
            status: status.as_str().to_string(),
            strategy: strategy.to_string(),
        };
        self.inner.tasks_finished.get_or_create(&labels).inc();
    }

    pub fn model_call(&self, call: &ModelCallRecord<'_>) {
        let outcome = if call.ok { "ok" } else { "error" };
        let labels = ModelLabels {
            purpose: call.purpose.to_string(),
            model: call.model.to_string(),
            outcome: outcome.to_string(),
        };
        self.inner.model_calls.get_or_create(&labels).inc();
        for (direction, tokens) in [("input", call.input_tokens), ("output", call.output_tokens)] {
            let labels = TokenLabels {
                purpose: call.purpose.to_string(),
                model: call.model.to_string(),
                direction: direction.to_string(),
            };
            self.inner
                .model_tokens
                .get_or_create(&labels)
                .inc_by(tokens);
        }
    }

    /// One tool call: `outcome` is `ok`, `error` (the tool answered an error) or the failure's
    /// class.
    pub fn tool_call(&self, tool: &str, outcome: &str, took: Duration) {
        let labels = ToolLabels {
            tool: tool.to_string(),
            outcome: outcome.to_string(),
        };
        self.inner.tool_calls.get_or_create(&labels).inc();
        let named = ToolNameLabels {
            tool: tool.to_string(),
        };
        self.inner
            .step_seconds
            .get_or_create(&named)
            .observe(took.as_secs_f64());
    }

    pub fn leases_reclaimed(&self, count: u64) {
        self.inner.lease_reclaims.inc_by(count);
    }

    /// Counts an open event stream until the guard is dropped.
    pub fn sse_subscriber(&self) -> SubscriberGuard {
        self.inner.sse_subscribers.inc();
        SubscriberGuard {
            meters: self.clone(),
        }
    }

    pub fn set_db_pool_in_use(&self, connections: u32) {
        self.inner.db_pool_in_use.set(i64::from(connections));
    }

    pub fn http_request(&self, method: &str, route: &str, status: u16) {
        let labels = HttpLabels {
            method: method.to_string(),
            route: route.to_string(),
            status: status.to_string(),
        };
        self.inner.http_requests.get_or_create(&labels).inc();
    }
}

/// What one commit's events will count, once the commit applied.
pub struct Tally {
    meters: Meters,
    strategy: String,
    noted: Vec<Noted>,
}

enum Noted {
    Step { ok: bool },
    Repair(String),
    Gate(String),
    End(TaskStatus),
}

impl Tally {
    pub fn count(self) {
        let inner = &self.meters.inner;
        for noted in self.noted {
            match noted {
                Noted::Step { ok } => {
                    let outcome = if ok { "ok" } else { "error" }.to_string();
                    inner.steps.get_or_create(&OutcomeLabels { outcome }).inc();
                }
                Noted::Repair(level) => {
                    inner.repairs.get_or_create(&LevelLabels { level }).inc();
                }
                Noted::Gate(route) => {
                    inner.gate.get_or_create(&RouteLabels { route }).inc();
                }
                Noted::End(status) => self.meters.task_ended(status, &self.strategy),
            }
        }
    }
}

/// An open event stream, counted in `cairn_sse_subscribers` while it lives.
pub struct SubscriberGuard {
    meters: Meters,
}

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        self.meters.inner.sse_subscribers.dec();
    }
}

#[cfg(test)]
mod tests;
