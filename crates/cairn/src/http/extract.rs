//! Extractors whose rejections are problems, and the fallbacks for unknown routes and methods.
//!
//! axum's own extractors answer bad input with `text/plain` bodies and, for JSON data errors,
//! 422 without a stable code. These wrappers keep axum's parsing but turn every rejection into an
//! [`ApiError`], so no bad request ever sees a body that is not `application/problem+json`.

use std::fmt;
use std::marker::PhantomData;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Uri};
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::http::error::ApiError;

/// `axum::Json` with problem rejections.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<Object<T>>::from_request(req, state).await {
            Ok(axum::Json(Object(value))) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// A body that must be a JSON object: serde's derived structs also take an array of the fields
/// in order (`[0]` for `{"percent": 0}`), which the OpenAPI document (`type: object`) does not
/// allow, so the server must not either.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        object(deserializer).map(Object)
    }
}

/// `deserialize_with` for a struct-typed field that must be a JSON object (see [`Object`]).
pub fn object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct ObjectVisitor<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
        type Value = T;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(MapAccessDeserializer::new(map))
        }
    }

    deserializer.deserialize_map(ObjectVisitor(PhantomData))
}

/// `deserialize_with` for an optional struct-typed field that must be a JSON object when given:
/// absent (with `#[serde(default)]`) or `null` is `None`.
pub fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let value: Option<Object<T>> = Deserialize::deserialize(deserializer)?;
    Ok(value.map(|Object(value)| value))
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::JsonSyntaxError(error) => {
            let text = error.body_text();
            let text = text
                .strip_prefix("Failed to parse the request body as JSON: ")
                .unwrap_or(&text);
            ApiError::InvalidJson(format!("the body is not valid JSON: {text}"))
        }
        // Wrong types, unknown fields and missing fields: the field's path and what is wrong.
        JsonRejection::JsonDataError(error) => {
            ApiError::validation(crate::http::plain::data_error(&error.body_text()))
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
            "the body must be JSON, sent with `Content-Type: application/json`".into(),
        ),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(
            "the request body is larger than the configured limit (max_body_bytes)".into(),
        ),
        other => {
            ApiError::InvalidJson(format!("the body could not be read: {}", other.body_text()))
        }
    }
}

/// `axum::extract::Query` with problem rejections.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(QueryRejection::FailedToDeserializeQueryString(error)) => Err(
                ApiError::InvalidParameter(format!("invalid query: {}", error.body_text())),
            ),
            Err(other) => Err(ApiError::InvalidParameter(other.body_text())),
        }
    }
}

/// `axum::extract::Path` with problem rejections (for example a segment that is not UTF-8).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::InvalidParameter(format!(
                "invalid path: {}",
                rejection.body_text()
            ))),
        }
    }
}

/// Parses a task id from the path with a message that names the parameter.
pub fn parse_task_id(raw: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(raw).map_err(|error| {
        ApiError::InvalidParameter(format!("path parameter `id` must be a UUID: {error}"))
    })
}

/// Every unknown path.
pub async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {method} {}", uri.path()))
}

/// A known path with a method it does not serve.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!("{method} is not allowed on {}", uri.path()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[serde(deserialize_with = "object")]
        inner: Inner,
    }

    #[test]
    fn bodies_and_marked_fields_must_be_objects() {
        let parse = |json: &str| serde_json::from_str::<Object<Outer>>(json).map(|o| o.0);
        assert_eq!(
            parse(r#"{"inner": {"n": 1}}"#).expect("objects"),
            Outer {
                inner: Inner { n: 1 }
            }
        );
        for bad in [
            r#"[{"n": 1}]"#,
            r#"{"inner": [1]}"#,
            r#"[[1]]"#,
            "1",
            "null",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // Unknown fields are still refused through the object path.
        assert!(parse(r#"{"inner": {"n": 1, "m": 2}}"#).is_err());
    }
}
