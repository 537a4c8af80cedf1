//! Application state, the router and the server.
//!
//! [`router`] is the whole HTTP surface: the `/v1` resources from [`crate::http`], health and
//! the OpenAPI document, plus the layers that keep the error policy of [`super::error`] true
//! everywhere: a body limit, problem fallbacks for unknown routes and methods, and a panic
//! guard, and outermost the limits of [`super::guard`] (head size, rate, timeouts, streams).
//! [`serve`] runs it on [`super::conn`] with graceful shutdown, which also ends live SSE streams
//! (they would otherwise hold the server open forever).

use std::future::Future;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, Problem};
use super::guard::{self, Guard};
use super::health::OpenApiDocument;
use super::state::{AppState, ShutdownSignal};
use super::{
    approvals, artifacts, auth, auth_doc, dashboard, events, extract, health, ledger, messages,
    metrics, plan_diff, plans, rollout, shadow, stats, stream_token, tasks, tools,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "cairn",
        description = "A durable planning service for LLM agents. Errors are application/problem+json with stable `type` codes."
    ),
    tags(
        (name = "tasks", description = "Submit, read, list and cancel tasks."),
        (name = "events", description = "A task's events: Server-Sent Events or JSON pages."),
        (name = "plans", description = "Immutable plan versions."),
        (name = "tools", description = "The tools operators registered."),
        (name = "ledger", description = "A task's budget ledger, derived from its entries."),
        (name = "stats", description = "Planner telemetry and the gate's decisions with outcomes."),
        (name = "health", description = "Liveness, readiness and this document."),
    ),
    components(schemas(Problem))
)]
struct ApiDoc;

/// Every route, with its OpenAPI description, before state is attached.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(rollout::get_rollout, rollout::set_rollout))
        .routes(routes!(shadow::start, shadow::compare))
        .routes(routes!(tasks::create_task, tasks::list_tasks))
        .routes(routes!(tasks::get_task))
        .routes(routes!(tasks::cancel_task))
        .routes(routes!(messages::post_message, messages::list_messages))
        .routes(routes!(approvals::list_approvals))
        .routes(routes!(approvals::decide))
        .routes(routes!(events::task_events))
        .routes(routes!(stream_token::create))
        .routes(routes!(artifacts::list_artifacts))
        .routes(routes!(plans::list_plans))
        .routes(routes!(plans::get_plan))
        .routes(routes!(tools::list_tools))
        .routes(routes!(tools::refresh_tools))
        .routes(routes!(plan_diff::plan_diff))
        .routes(routes!(ledger::get_ledger))
        .routes(routes!(stats::get_stats))
        .routes(routes!(stats::get_gate_stats))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::openapi))
        .routes(routes!(metrics::metrics))
}

/// The OpenAPI document of [`router`], with the answers of its limits on every route.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = api_routes().into_openapi();
    super::limits_doc::document_limits(&mut document);
    auth_doc::describe(&mut document);
    document
}

/// The OpenAPI document as pretty JSON: what `cairn openapi` prints and `openapi/openapi.json`
/// holds.
pub fn openapi_json() -> String {
    render(&openapi())
}

fn render(document: &utoipa::openapi::OpenApi) -> String {
    // The document is plain data with string keys; serialising it does not fail, and if it
    // ever did, the drift test would show the empty document.
    let mut json = document.to_pretty_json().unwrap_or_else(|error| {
        tracing::error!(%error, "the OpenAPI document does not serialise");
        String::from("{}")
    });
    json.push('\n');
    json
}

/// The document a running server serves: the committed one, naming the registered tools.
fn served(document: &utoipa::openapi::OpenApi, tools: &crate::tools::ToolRegistry) -> String {
    if tools.is_empty() {
        return render(document);
    }
    let Ok(mut value) = serde_json::to_value(document) else {
        return render(document);
    };
    super::tools_doc::name_registered(&mut value, tools);
    match serde_json::to_string_pretty(&value) {
        Ok(mut json) => {
            json.push('\n');
            json
        }
        Err(_) => render(document),
    }
}

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    let (api, mut document) = api_routes().split_for_parts();
    super::limits_doc::document_limits(&mut document);
    auth_doc::describe(&mut document);
    let document = OpenApiDocument(Arc::new(served(&document, &state.tools.current())));
    // Authentication and scopes ([`auth`]): routes only, so unknown paths stay 404s. The
    // per-client limits run inside it, so they count against the caller's key.
    let limits = Guard::new(state.settings.limits.clone());
    let guard = axum::middleware::from_fn_with_state(state.clone(), auth::guard);
    api.route_layer(axum::middleware::from_fn_with_state(
        limits.clone(),
        guard::per_client,
    ))
    .route_layer(guard)
    .route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        metrics::count,
    ))
    // The page holds no privilege (it is a client of the API above), so no route layer of the
    // API applies to it.
    .merge(dashboard::routes(state.settings.dashboard))
    .method_not_allowed_fallback(extract::method_not_allowed)
    .fallback(extract::not_found)
    .layer(Extension(document))
    .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
    .layer(CatchPanicLayer::custom(panic_response))
    .layer(axum::middleware::from_fn_with_state(limits, guard::limit))
    .layer(axum::middleware::map_response(nosniff))
    .layer(TraceLayer::new_for_http())
    .with_state(state)
}

/// Every answer says its content type is the one to trust (`X-Content-Type-Options: nosniff`),
/// so a browser never runs a JSON body or a problem as something else.
async fn nosniff(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    response
}

/// A handler panic is a bug: log it, answer a plain 500 problem, keep serving.
fn panic_response(payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    ApiError::Internal(format!("handler panicked: {message}")).into_response()
}

/// Serves [`router`] on `listener` until `shutdown` resolves, then stops accepting, ends live
/// SSE streams and waits for in-flight requests to finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stopping, signal) = watch::channel(false);
    let limits = state.settings.limits.clone();
    let app = router(state).layer(Extension(ShutdownSignal(signal.clone())));
    tokio::spawn(async move {
        shutdown.await;
        // Ends live streams and tells the accept loop and every connection to finish.
        let _ = stopping.send(true);
    });
    super::conn::serve(listener, app, limits, signal).await
}
