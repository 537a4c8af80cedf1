//! Hand-written OpenAPI schemas for what utoipa's attributes cannot state.
//!
//! - [`EventFrame`]: one Server-Sent Event of `GET /v1/tasks/{id}/events`. Before OpenAPI 3.2
//!   the `schema` of a `text/event-stream` response describes each event as a client parses it:
//!   an object with the frame's `id`, `event` and `data` fields (keep-alive comments are not
//!   events). Here `id` is the event's `seq`, `event` its kind and `data` the [`Event`] as JSON,
//!   which `contentMediaType` and `contentSchema` state, so a validator (such as the API fuzz
//!   test's schemathesis) decodes it and checks it against the `Event` schema too.
//! - [`Metadata`] and [`MetadataValue`]: a task's `metadata`, any JSON object whose keys and
//!   strings, at any depth, hold no NUL (Postgres cannot store it), as a recursive schema.
//!
//! utoipa has no attribute for `contentSchema` or a type list with `items`, so these go in as
//! extension keys, which utoipa writes into the schema object as they are.

use std::borrow::Cow;

use serde_json::json;
use utoipa::openapi::RefOr;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::domain::event::Event;
use crate::http::error::Problem;

/// One SSE frame of a task's event stream (documentation only; frames are written by axum).
pub struct EventFrame;

impl PartialSchema for EventFrame {
    fn schema() -> RefOr<Schema> {
        let event_ref = format!("#/components/schemas/{}", Event::name());
        let content_schema: Extensions = [("contentSchema", json!({ "$ref": event_ref }))]
            .into_iter()
            .collect();
        let id = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[1-9][0-9]*$"))
            .description(Some("The event's `seq`; `Last-Event-ID` on reconnect."));
        let event = ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .description(Some("The event's kind, e.g. `task.created`."));
        let data = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type("application/json")
            .extensions(Some(content_schema))
            .description(Some("The `Event` as compact JSON on one line."));
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "One Server-Sent Event: `id` = seq, `event` = kind, `data` = the Event JSON.",
            ))
            .property("id", id)
            .property("event", event)
            .property("data", data)
            .required("id")
            .required("event")
            .required("data")
            .into()
    }
}

impl ToSchema for EventFrame {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("EventFrame")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((Event::name().into_owned(), Event::schema()));
        Event::schemas(schemas);
    }
}

/// A string without NUL: what every key and string of `metadata` must be.
const NO_NUL: &str = "^[^\\x00]*$";

/// A task's `metadata`: a JSON object whose keys and values hold no NUL.
pub struct Metadata;

impl PartialSchema for Metadata {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "Free-form JSON object kept with the task: at most 16 KiB as compact JSON, and \
                 no NUL character in any key or string.",
            ))
            .property_names(Some(no_nul_string()))
            .additional_properties(Some(value_ref()))
            .into()
    }
}

impl ToSchema for Metadata {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Metadata")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((MetadataValue::name().into_owned(), MetadataValue::schema()));
    }
}

/// Any JSON value of `metadata`, at any depth: each keyword applies only to its own type
/// (`pattern` to strings, `items` to arrays, `propertyNames` and `additionalProperties` to
/// objects).
pub struct MetadataValue;

impl PartialSchema for MetadataValue {
    fn schema() -> RefOr<Schema> {
        let items: Extensions = [("items", json!({ "$ref": value_ref_path() }))]
            .into_iter()
            .collect();
        let any = [
            Type::Null,
            Type::Boolean,
            Type::Number,
            Type::String,
            Type::Array,
            Type::Object,
        ];
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter(any))
            .description(Some(
                "A JSON value of `metadata`: no NUL in any key or string.",
            ))
            .pattern(Some(NO_NUL))
            .property_names(Some(no_nul_string()))
            .additional_properties(Some(value_ref()))
            .extensions(Some(items))
            .into()
    }
}

impl ToSchema for MetadataValue {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("MetadataValue")
    }
}

fn value_ref_path() -> String {
    format!("#/components/schemas/{}", MetadataValue::name())
}

fn value_ref() -> RefOr<Schema> {
    RefOr::Ref(utoipa::openapi::Ref::new(value_ref_path()))
}

fn no_nul_string() -> Schema {
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(NO_NUL))
            .build(),
    )
}

/// The answers any route that reads or writes the store can give besides its own: listed in the
/// `responses(...)` of each such route.
#[derive(utoipa::IntoResponses)]
pub enum StoreFailure {
    /// The database is temporarily unreachable (`/problems/unavailable`); nothing was written.
    #[response(
        status = 503,
        content_type = "application/problem+json",
        headers(("Retry-After" = u32, description = "Seconds to wait before retrying."))
    )]
    Unavailable(Problem),
    /// The server failed to handle the request (`/problems/internal`); the cause is logged and
    /// never sent.
    #[response(status = 500, content_type = "application/problem+json")]
    Internal(Problem),
}

/// A name `?kinds=` takes: an event kind or a family of them (documentation only; parsed by
/// [`crate::http::events::filter::KindFilter`]).
pub struct EventKindName;

impl PartialSchema for EventKindName {
    fn schema() -> RefOr<Schema> {
        let names = crate::domain::event::kinds::ALL
            .into_iter()
            .chain(crate::http::events::filter::families());
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(names))
            .description(Some(
                "An event kind (`step.finished`) or a family (`ledger`: every `ledger.*`).",
            ))
            .into()
    }
}

impl ToSchema for EventKindName {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("EventKindName")
    }
}
