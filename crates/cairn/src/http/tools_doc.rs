//! The OpenAPI schema of a task's tool list, and the served document naming this deployment's
//! tools. The committed document (`cairn openapi`) cannot know which tools an operator
//! registers, so there a name is any short string without NUL; `GET /openapi.json` of a
//! running server lists the registered names as the only ones allowed, so a client (or a fuzzer)
//! reading it sends no name the API refuses.

use std::borrow::Cow;

use serde_json::{Value, json};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::tools::ToolRegistry;

/// Most names a task's tool list may hold.
pub const MAX_TASK_TOOLS: usize = 64;

/// A task's `tools`: distinct names of registered tools.
pub struct TaskTools;

impl PartialSchema for TaskTools {
    fn schema() -> RefOr<Schema> {
        ArrayBuilder::new()
            .items(RefOr::Ref(Ref::from_schema_name(ToolName::name())))
            .max_items(Some(MAX_TASK_TOOLS))
            .unique_items(true)
            .description(Some(
                "The registered tools the task may use (`GET /v1/tools` lists them): the \
                 planner offers only these and the executor calls no other. Omitted, every \
                 registered tool.",
            ))
            .into()
    }
}

impl ToSchema for TaskTools {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TaskTools")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((ToolName::name().into_owned(), ToolName::schema()));
    }
}

/// One registered tool's name.
pub struct ToolName;

impl PartialSchema for ToolName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(128))
            .pattern(Some("^[^\\x00]+$"))
            .description(Some("A registered tool's name."))
            .into()
    }
}

impl ToSchema for ToolName {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ToolName")
    }
}

/// The served document with the registered tools as the only tool names allowed; as it is
/// when the server has no registry.
pub fn name_registered(document: &mut Value, registry: &ToolRegistry) {
    if registry.is_empty() {
        return;
    }
    let names: Vec<String> = registry.names().into_iter().collect();
    if let Some(schema) = document
        .pointer_mut("/components/schemas/ToolName")
        .and_then(Value::as_object_mut)
    {
        schema.insert("enum".into(), json!(names));
    }
}
