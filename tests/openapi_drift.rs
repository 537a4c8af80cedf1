//! `openapi/openapi.json` is the committed output of `cairn::http::openapi_json()`, which is
//! generated from the routes themselves. This test fails when the two differ, so the published
//! document can never drift from the code.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::path::PathBuf;

const REGENERATE: &str = "regenerate it with `CAIRN_UPDATE_OPENAPI=1 cargo test --test \
                          openapi_drift` (or `cargo run -- openapi > openapi/openapi.json`) and \
                          commit the result";

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json")
}

#[test]
fn committed_document_matches_the_code() {
    let generated = cairn::http::openapi_json();
    let path = committed_path();
    if std::env::var_os("CAIRN_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).expect("write openapi/openapi.json");
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}; {REGENERATE}", path.display()));
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "openapi/openapi.json differs from the code (first difference at line {}):\n  \
             committed: {:?}\n  generated: {:?}\n{REGENERATE}",
            line + 1,
            committed.lines().nth(line).unwrap_or("<end of file>"),
            generated.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn document_describes_every_route_and_problem_bodies() {
    let document: serde_json::Value =
        serde_json::from_str(&cairn::http::openapi_json()).expect("valid JSON");
    let paths = document["paths"].as_object().expect("paths");
    for (path, methods) in [
        ("/v1/tasks", &["get", "post"][..]),
        ("/v1/tasks/{id}", &["get"]),
        ("/v1/tasks/{id}/cancel", &["post"]),
        ("/v1/tasks/{id}/events", &["get"]),
        ("/v1/tasks/{id}/plans", &["get"]),
        ("/v1/tasks/{id}/plans/{version}", &["get"]),
        ("/healthz", &["get"]),
        ("/readyz", &["get"]),
        ("/openapi.json", &["get"]),
    ] {
        for method in methods {
            let operation = &paths.get(path).unwrap_or_else(|| panic!("{path} missing"))[method];
            assert!(operation.is_object(), "{method} {path} missing");
            // Every documented error answers with a problem body.
            let responses = operation["responses"].as_object().expect("responses");
            for (status, response) in responses {
                // A shared response (the server's limits) is a `$ref` into components.
                let response = match response["$ref"].as_str() {
                    Some(shared) => {
                        let name = shared.trim_start_matches("#/components/responses/");
                        &document["components"]["responses"][name]
                    }
                    None => response,
                };
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        response["content"]["application/problem+json"].is_object(),
                        "{method} {path} {status} is not documented as problem+json"
                    );
                }
            }
        }
    }
    assert!(document["components"]["schemas"]["Problem"].is_object());
}
