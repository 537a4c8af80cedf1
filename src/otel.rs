//! Logs and traces for the process: `tracing` lines on stderr (stdout carries the lines scripts
//! parse; `RUST_LOG` sets the filter, text or JSON), and,
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, the
//! spans of `cairn::traces` exported over OTLP/HTTP. The exporter reads the standard variables
//! itself: `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default, or `http/json`),
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`; `OTEL_SERVICE_NAME` names the
//! service (default `cairn`) and `OTEL_BSP_SCHEDULE_DELAY` how often batches are sent.

use std::io::IsTerminal;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::SpanExporter;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

use cairn::config::LogFormat;

/// The spans cairn names for traces; logs never print them (their fields are for a trace
/// backend, and would fill every log line).
const TRACES_TARGET: &str = "cairn::traces";

/// The exporter, kept to send what is buffered when the process ends.
pub struct Traces(Option<SdkTracerProvider>);

impl Traces {
    /// Sends the spans still buffered, then stops the exporter.
    pub fn shutdown(self) {
        if let Some(provider) = self.0
            && let Err(error) = provider.shutdown()
        {
            eprintln!("cairn: traces not all sent: {error}");
        }
    }
}

/// Starts logging, and trace export when an OTLP endpoint is configured.
pub fn init(format: LogFormat, default_level: &str) -> Traces {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(default_level))
        .add_directive(format!("{TRACES_TARGET}=off").parse().unwrap_or_default());
    let logs = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let logs = match format {
        LogFormat::Json => logs.json().with_filter(filter).boxed(),
        LogFormat::Text => logs.with_filter(filter).boxed(),
    };
    let (provider, exporting) = match exporter() {
        Some(Ok(provider)) => (Some(provider), None),
        Some(Err(error)) => (None, Some(error)),
        None => (None, None),
    };
    let traces = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("cairn"))
            .with_filter(Targets::new().with_target(TRACES_TARGET, Level::INFO))
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    if let Some(error) = exporting {
        // Traces are an operator's aid: a wrong endpoint is reported, never fatal.
        tracing::error!(%error, "OpenTelemetry export is off: the OTLP exporter could not be built");
    }
    Traces(provider)
}

/// The tracer provider when an endpoint is set (`None`: traces are not exported).
fn exporter() -> Option<Result<SdkTracerProvider, String>> {
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
    if !set("OTEL_EXPORTER_OTLP_ENDPOINT") && !set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return None;
    }
    let exporter = match SpanExporter::builder().with_http().build() {
        Ok(exporter) => exporter,
        Err(error) => return Some(Err(error.to_string())),
    };
    let name = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "cairn".to_string());
    let resource = Resource::builder()
        .with_service_name(name)
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Some(Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build()))
}
