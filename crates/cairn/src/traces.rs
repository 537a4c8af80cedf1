//! Spans in the shape of the OpenTelemetry GenAI semantic conventions: one `invoke_workflow`
//! per task attempt, `plan` around a planner's call, `chat {model}` per model call and
//! `execute_tool {tool}` per tool call, with the `gen_ai.*` attributes and cairn's own
//! (`cairn.*`: task, milestone, purpose, attempt, repair level, budget, outcome).
//!
//! They are ordinary `tracing` spans: `cairn serve` exports them over OTLP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the binary installs the exporter; this crate only
//! names and fills spans), and otherwise they cost a disabled span each. The outgoing model and
//! tool requests carry the W3C `traceparent` of the span they run in, so a model server or a tool
//! that traces joins the same trace.

use opentelemetry::trace::TraceContextExt;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The span of one task attempt (`invoke_workflow`), in which every other span of it runs.
pub struct Workflow<'a> {
    pub task_id: &'a str,
    pub strategy: &'a str,
    pub attempt: i64,
    pub budget_tokens: u64,
    pub budget_tool_calls: u64,
    pub budget_wall_ms: u64,
}

impl Workflow<'_> {
    pub fn span(&self) -> Span {
        tracing::info_span!(
            target: "cairn::traces",
            "invoke_workflow",
            otel.name = "invoke_workflow",
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_workflow",
            gen_ai.workflow.name = "cairn.task",
            cairn.task.id = self.task_id,
            cairn.strategy = self.strategy,
            cairn.attempt = self.attempt,
            cairn.budget.tokens = self.budget_tokens,
            cairn.budget.tool_calls = self.budget_tool_calls,
            cairn.budget.wall_ms = self.budget_wall_ms,
            cairn.plan.version = Empty,
            cairn.outcome = Empty,
        )
    }
}

/// Records the plan version a task attempt wrote last on its span (the engine runs in it).
pub fn plan_versioned(version: i64) {
    Span::current().record("cairn.plan.version", version);
}

/// Records how a task attempt ended on its span (`error` status unless it succeeded or yielded).
pub fn workflow_ended(span: &Span, outcome: &str, ok: bool) {
    span.record("cairn.outcome", outcome);
    if !ok {
        span.record("otel.status_code", "error");
    }
}

/// What a model call is, for its span.
pub struct Chat<'a> {
    pub provider: &'a str,
    /// The model the call asks for (the span is named after it, as the conventions say).
    pub request_model: &'a str,
    pub purpose: &'a str,
    pub task_id: &'a str,
    pub milestone: Option<&'a str>,
    pub attempt: u32,
    /// The repair rung a tactical call answers (`retry_step`, `replan_milestone`), if any.
    pub repair_level: Option<&'a str>,
}

impl Chat<'_> {
    /// A planner's call (`plan`, with the `chat` span inside it) or `None` for other calls.
    pub fn plan_span(&self) -> Option<Span> {
        let planner = matches!(self.purpose, "strategic" | "tactical");
        planner.then(|| {
            tracing::info_span!(
                target: "cairn::traces",
                "plan",
                otel.name = "plan",
                otel.kind = "internal",
                otel.status_code = Empty,
                gen_ai.operation.name = "plan",
                cairn.purpose = self.purpose,
                cairn.task.id = self.task_id,
                cairn.milestone = self.milestone,
                cairn.attempt = self.attempt,
                cairn.repair.level = self.repair_level,
            )
        })
    }

    /// The `chat {model}` span; its response attributes are filled by [`chat_ended`].
    pub fn span(&self) -> Span {
        tracing::info_span!(
            target: "cairn::traces",
            "chat",
            otel.name = %format_args!("chat {}", self.request_model),
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = self.provider,
            gen_ai.request.model = self.request_model,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
            cairn.purpose = self.purpose,
            cairn.task.id = self.task_id,
            cairn.milestone = self.milestone,
            cairn.attempt = self.attempt,
            cairn.repair.level = self.repair_level,
            cairn.verdict = Empty,
            gen_ai.input.messages = Empty,
            gen_ai.output.messages = Empty,
        )
    }
}

/// The messages a call sent, on its span (only when the operator opted in to content).
pub fn chat_input(span: &Span, messages: &serde_json::Value) {
    span.record("gen_ai.input.messages", messages.to_string().as_str());
}

/// The answer a call got, on its span (only when the operator opted in to content).
pub fn chat_output(span: &Span, messages: &serde_json::Value) {
    span.record("gen_ai.output.messages", messages.to_string().as_str());
}

/// What a model call came to, recorded on its `chat` span.
pub struct ChatEnded<'a> {
    pub model: Option<&'a str>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The failure's class, when it failed.
    pub error: Option<&'a str>,
    /// A verifier's `pass` or `fail`.
    pub verdict: Option<&'a str>,
}

pub fn chat_ended(span: &Span, ended: &ChatEnded<'_>) {
    if let Some(model) = ended.model {
        span.record("gen_ai.response.model", model);
    }
    span.record("gen_ai.usage.input_tokens", ended.input_tokens);
    span.record("gen_ai.usage.output_tokens", ended.output_tokens);
    if let Some(verdict) = ended.verdict {
        span.record("cairn.verdict", verdict);
    }
    if let Some(error) = ended.error {
        span.record("error.type", error);
        span.record("otel.status_code", "error");
    }
}

/// The `execute_tool {tool}` span of one tool call.
pub fn tool_span(tool: &str, task_id: &str) -> Span {
    tracing::info_span!(
        target: "cairn::traces",
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.type = "function",
        error.type = Empty,
        cairn.task.id = task_id,
        cairn.tool.outcome = Empty,
    )
}

/// Records a tool call's outcome (`ok`, `error`, `receipt`, or the failure's class).
pub fn tool_ended(span: &Span, outcome: &str, failed: bool) {
    span.record("cairn.tool.outcome", outcome);
    if failed {
        span.record("error.type", outcome);
        span.record("otel.status_code", "error");
    }
}

/// The W3C `traceparent` of the current span, when it belongs to a trace being recorded.
pub fn traceparent() -> Option<String> {
    let context = Span::current().context();
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )
    })
}
