//! The limits' answers in the OpenAPI document: every operation can meet the head size checks
//! (414, 431), the connection limit and request time limit (503), and, but for the health
//! probes, the rate limit (429); an operation with a body also the body deadline (408) and the
//! body limit (413). The router's document passes through [`document_limits`], so the routes'
//! own annotations need not repeat them.

use utoipa::openapi::path::Operation;
use utoipa::openapi::{
    Components, ContentBuilder, HeaderBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Response,
    ResponseBuilder, Type,
};

use super::error::PROBLEM_JSON;

/// Status, the shared response's name under `components/responses`, its description, whether
/// it carries `Retry-After`.
type Answer = (&'static str, &'static str, &'static str, bool);

const EVERY_ROUTE: [Answer; 3] = [
    (
        "414",
        "UriTooLong",
        "`/problems/uri-too-long`: the path and query exceed `http.max_uri_bytes`.",
        false,
    ),
    (
        "431",
        "HeadersTooLarge",
        "`/problems/headers-too-large`: the headers exceed `http.max_header_bytes` or `http.max_headers`.",
        false,
    ),
    (
        "503",
        "Unavailable",
        "`/problems/timeout`: not answered within `http.request_timeout_ms`; `/problems/overloaded`: every connection is busy; `/problems/unavailable`: the database is not reachable. Retry after `Retry-After` seconds.",
        true,
    ),
];
const RATE_LIMITED: Answer = (
    "429",
    "TooManyRequests",
    "`/problems/rate-limited`: this client is over its request rate (`http.rate_per_s`, bursts of `http.rate_burst`); `/problems/too-many-streams`: it holds `http.sse_per_client` live event streams. Retry after `Retry-After` seconds.",
    true,
);
const WITH_BODY: [Answer; 2] = [
    (
        "408",
        "RequestTimeout",
        "`/problems/request-timeout`: the body did not arrive within `http.body_timeout_ms`.",
        false,
    ),
    (
        "413",
        "PayloadTooLarge",
        "`/problems/payload-too-large`: the body is larger than `max_body_bytes`.",
        false,
    ),
];
const UNLIMITED_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// Adds the limits' answers to every operation of `document` (see the module docs), each a
/// reference to one shared response. A status a route already documents keeps its own
/// description (a 503's gets the limits' causes appended).
pub fn document_limits(document: &mut OpenApi) {
    let mut used: Vec<Answer> = Vec::new();
    for (path, item) in document.paths.paths.iter_mut() {
        let limited = !UNLIMITED_PATHS.contains(&path.as_str());
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
        ];
        for operation in operations.into_iter().flatten() {
            let mut answers: Vec<Answer> = EVERY_ROUTE.to_vec();
            if limited {
                answers.push(RATE_LIMITED);
            }
            if operation.request_body.is_some() {
                answers.extend(WITH_BODY);
            }
            for answer in answers {
                add(operation, answer);
                if !used.contains(&answer) {
                    used.push(answer);
                }
            }
        }
    }
    let components = document.components.get_or_insert_with(Components::new);
    for (_, name, description, retry_after) in used {
        components.responses.insert(
            name.to_string(),
            RefOr::T(problem(description, retry_after)),
        );
    }
}

fn add(operation: &mut Operation, (status, name, description, _): Answer) {
    let responses = &mut operation.responses.responses;
    match responses.get_mut(status) {
        // Only 503 has more causes than the route's own (a route's 413 is the body limit).
        Some(RefOr::T(existing)) if status == "503" => {
            if !existing.description.contains(description) {
                existing.description = format!("{} Also {description}", existing.description);
            }
        }
        Some(_) => {}
        None => {
            let shared = Ref::new(format!("#/components/responses/{name}"));
            responses.insert(status.to_string(), RefOr::Ref(shared));
        }
    }
}

fn problem(description: &str, retry_after: bool) -> Response {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .build();
    let response = ResponseBuilder::new()
        .description(description)
        .content(PROBLEM_JSON, content);
    let response = if retry_after {
        let seconds = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1));
        let header = HeaderBuilder::new()
            .schema(seconds)
            .description(Some("Seconds to wait before retrying."));
        response.header("Retry-After", header.build())
    } else {
        response
    };
    response.build()
}
