//! The web dashboard: a page at `/` and its files at `/ui/{name}`, compiled into the binary, so
//! a server works offline and needs no build step at run time (the files are plain JavaScript
//! modules; `assets/README.md` says why no framework).
//!
//! The page is only a client of the `/v1` API: it holds no privilege, so its own routes need
//! none. A person signs in with an API key the page keeps in memory and streams with stream
//! tokens; what a key may see is decided by the API as for any other client. The page is
//! served under a strict Content-Security-Policy: its own scripts and styles only, requests to
//! this origin only, never framed.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::error::ApiError;
use super::state::AppState;

/// What a dashboard answer may load and where it may connect.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
     form-action 'self'";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The page.
const INDEX: &str = include_str!("assets/index.html");

/// Every file served under `/ui/`: name, content type, body.
const FILES: &[(&str, &str, &str)] = &[
    ("app.css", CSS, include_str!("assets/app.css")),
    ("app.js", JS, include_str!("assets/app.js")),
    ("api.js", JS, include_str!("assets/api.js")),
    ("dom.js", JS, include_str!("assets/dom.js")),
    ("tasks.js", JS, include_str!("assets/tasks.js")),
    ("task.js", JS, include_str!("assets/task.js")),
    ("dag.js", JS, include_str!("assets/dag.js")),
    ("ledger.js", JS, include_str!("assets/ledger.js")),
    ("plans.js", JS, include_str!("assets/plans.js")),
    ("timeline.js", JS, include_str!("assets/timeline.js")),
    ("stats.js", JS, include_str!("assets/stats.js")),
    ("submit.js", JS, include_str!("assets/submit.js")),
    ("approvals.js", JS, include_str!("assets/approvals.js")),
];

/// The dashboard's routes (none when it is turned off: `/` is then a 404 like any unknown path).
pub fn routes(enabled: bool) -> Router<AppState> {
    if !enabled {
        return Router::new();
    }
    Router::new()
        .route("/", get(index))
        .route("/ui/{name}", get(file))
}

async fn index() -> Response {
    answer(HTML, INDEX)
}

async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(file, _, _)| *file == name) {
        Some((_, kind, body)) => answer(kind, body),
        None => ApiError::NotFound(format!("the dashboard has no file {name:?}")).into_response(),
    }
}

/// One file with its type and the headers every dashboard answer carries. The files change
/// only with the binary, so a browser asks again each time (`no-cache`) rather than keep a
/// page that no longer matches its server.
fn answer(kind: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module the page imports is served: a file added to `assets/` but not to `FILES`
    /// would load in the dev proxy and fail in the binary.
    #[test]
    fn every_imported_module_and_stylesheet_is_served() {
        let sources = std::iter::once(INDEX).chain(FILES.iter().map(|(_, _, body)| *body));
        for source in sources {
            for quoted in source.split(['"', '\'']) {
                let Some(name) = quoted
                    .strip_prefix("/ui/")
                    .or_else(|| quoted.strip_prefix("./"))
                else {
                    continue;
                };
                if name.ends_with(".js") || name.ends_with(".css") {
                    assert!(
                        FILES.iter().any(|(file, _, _)| *file == name),
                        "{name} is referenced but not served"
                    );
                }
            }
        }
    }

    #[test]
    fn every_asset_file_is_served() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/dashboard/assets");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name == "index.html" || name.ends_with(".md") {
                continue;
            }
            assert!(
                FILES.iter().any(|(file, _, _)| *file == name),
                "assets/{name} is not served"
            );
        }
    }
}
