//! The authentication part of the OpenAPI document, derived from [`super::auth::ACCESS`] so the
//! document and the enforcement cannot disagree: a `bearer` security scheme (and the
//! `stream_token` query scheme of the events route), and on every protected operation its
//! security requirement (naming the scope) and its `401`/`403` problem responses.

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{Components, OpenApi, Ref, RefOr};

use super::auth::{Access, access};
use super::error::PROBLEM_JSON;

/// The name of the API key scheme.
pub const BEARER: &str = "bearer";
/// The name of the stream-token scheme (`?token=` on the events route).
pub const STREAM_TOKEN: &str = "stream_token";

/// Adds the security schemes, requirements and 401/403 responses to `document`.
pub fn describe(document: &mut OpenApi) {
    let components = document.components.get_or_insert_with(Components::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("cairn_<key id>_<secret>")
                .description(Some(
                    "An API key from `cairn keys create`, as `Authorization: Bearer <key>`.",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        STREAM_TOKEN,
        SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
            "token",
            "A stream token from `POST /v1/tasks/{id}/stream-token` (events route only).",
        ))),
    );
    for (path, item) in document.paths.paths.iter_mut() {
        let operations = [
            ("GET", &mut item.get),
            ("PUT", &mut item.put),
            ("POST", &mut item.post),
            ("DELETE", &mut item.delete),
            ("PATCH", &mut item.patch),
        ];
        for (method, operation) in operations {
            if let (Some(operation), Some(Access::Scope(scope))) =
                (operation.as_mut(), access(method, path))
            {
                protect(operation, scope.as_str());
            }
        }
    }
}

fn protect(operation: &mut Operation, scope: &str) {
    let bearer = SecurityRequirement::new(BEARER, [scope]);
    let security = operation.security.get_or_insert_with(Vec::new);
    if security.is_empty() {
        security.push(bearer);
    } else {
        // Declared by the route (the events route: a key or a stream token); name the scope.
        *security = security
            .iter()
            .map(|requirement| {
                if *requirement == SecurityRequirement::new(BEARER, Vec::<String>::new()) {
                    bearer.clone()
                } else {
                    requirement.clone()
                }
            })
            .collect();
    }
    let responses = &mut operation.responses.responses;
    responses.insert(
        "401".into(),
        problem("No API key, or one that is malformed, unknown or revoked."),
    );
    responses.insert(
        "403".into(),
        problem(&format!("The API key lacks the `{scope}` scope.")),
    );
}

fn problem(description: &str) -> RefOr<utoipa::openapi::Response> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .build();
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content(PROBLEM_JSON, content)
            .build(),
    )
}
