//! The world's tools as a model sees them.
//!
//! The world's own policy needs no schemas (it answers from the ground truth), so a simulated
//! evaluation registers every tool as an open object. A real model (`cairn eval --live`) must
//! be told what to send: [`described`] gives each tool the arguments the suite's steps use,
//! plus the remedy arguments of the injected faults (`api`, `validate`, `page`, and `ref` of
//! `locate`), each with a description, so every argument the world can accept is one the model
//! was shown. Values stay free text: the world compares them as a reader would (see
//! [`super::perform`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::LOCATE;
use crate::suite::{FaultKind, Suite, ToolDoc};
use cairn::engine::runtime::ports::ToolSpec;

/// What the remedy arguments mean.
const REMEDIES: [(&str, &str); 3] = [
    (
        "api",
        "API version to call; send \"v2\" when a tool answers that the endpoint moved to API v2",
    ),
    (
        "validate",
        "send \"true\" to have the output validated against its schema (do so when a tool reports invalid data)",
    ),
    (
        "page",
        "page of a paged result; send the `next_page` a previous answer named",
    ),
];

/// Every tool of the suite and whether it writes: the tools its steps use (writing when a step
/// does), the tools its tasks are offered and its documents name (writing when documented so),
/// and `locate`.
pub(super) fn all_tools(suite: &Suite) -> BTreeMap<String, bool> {
    let mut tools: BTreeMap<String, bool> = BTreeMap::new();
    for step in suite.tasks.iter().flat_map(|t| t.steps.iter()) {
        *tools.entry(step.tool.clone()).or_default() |= step.writes;
    }
    let offered = suite.tasks.iter().flat_map(|t| t.tools.iter().flatten());
    for name in offered.chain(suite.tools.keys()) {
        let writes = suite.tools.get(name).is_some_and(|doc| doc.side_effects);
        *tools.entry(name.clone()).or_default() |= writes;
    }
    tools.remove(LOCATE);
    tools.insert(LOCATE.into(), false);
    tools
}

/// Each tool with every argument the suite's steps give it and the remedies its faults need;
/// a tool no step uses (a distractor) with the arguments its document names.
pub fn described(suite: &Suite) -> Vec<ToolSpec> {
    let stepped: BTreeSet<&str> = suite
        .tasks
        .iter()
        .flat_map(|t| t.steps.iter().map(|s| s.tool.as_str()))
        .collect();
    let mut tools: BTreeMap<String, (bool, BTreeSet<String>)> = all_tools(suite)
        .into_iter()
        .filter(|(name, _)| name != LOCATE)
        .map(|(name, writes)| {
            let documented = suite
                .tools
                .get(&name)
                .filter(|_| !stepped.contains(name.as_str()))
                .map(|d| d.args.keys().cloned().collect());
            (name, (writes, documented.unwrap_or_default()))
        })
        .collect();
    for task in &suite.tasks {
        for step in &task.steps {
            let entry = tools.entry(step.tool.clone()).or_default();
            entry.0 |= step.writes;
            entry.1.extend(step.args.keys().cloned());
        }
        let faulted = task
            .fault
            .as_ref()
            .and_then(|f| task.steps.iter().find(|s| s.id == f.step).map(|s| (f, s)));
        if let Some((fault, step)) = faulted {
            let remedy = match fault.kind {
                FaultKind::UnexpectedResponse => Some("api"),
                FaultKind::InvalidIntermediate => Some("validate"),
                FaultKind::IncompleteEvidence => Some("page"),
                _ => None,
            };
            if let Some(remedy) = remedy {
                tools
                    .entry(step.tool.clone())
                    .or_default()
                    .1
                    .insert(remedy.into());
            }
        }
    }
    let mut specs: Vec<ToolSpec> = tools
        .into_iter()
        .map(|(name, (writes, args))| ToolSpec {
            artifacts: declared(suite, &name),
            ..spec(&name, writes, &args, suite.tools.get(&name))
        })
        .collect();
    specs.push(ToolSpec {
        name: LOCATE.into(),
        description: "Finds a file that a tool reported missing (`no such file`)".into(),
        schema: json!({
            "type": "object",
            "properties": {"ref": {"type": "string",
                "description": "the missing path, as the error named it"}},
            "required": ["ref"],
            "additionalProperties": false,
        }),
        side_effects: false,
        artifacts: declared(suite, LOCATE),
    });
    specs
}

/// The artifacts tool `name` declares: one named after the tool when the suite's world
/// declares artifacts (`[world] declare_artifacts`; every answer then carries it, the remedy
/// tool `locate`'s too), none otherwise.
pub(super) fn declared(suite: &Suite, name: &str) -> Vec<String> {
    let own = suite
        .tools
        .get(name)
        .is_some_and(|doc| doc.declares_artifact);
    if suite.world.declare_artifacts || own {
        vec![name.to_string()]
    } else {
        Vec::new()
    }
}

fn spec(name: &str, writes: bool, args: &BTreeSet<String>, doc: Option<&ToolDoc>) -> ToolSpec {
    let properties: Map<String, Value> = args
        .iter()
        .map(|arg| {
            let description = REMEDIES
                .iter()
                .find(|(remedy, _)| remedy == arg)
                .map(|(_, text)| (*text).to_string())
                .or_else(|| doc.and_then(|d| d.args.get(arg)).cloned())
                .unwrap_or_else(|| {
                    format!(
                        "the {arg} this call is about, exactly as the goal or an earlier tool \
                         output states it"
                    )
                });
            (
                arg.clone(),
                json!({"type": "string", "description": description}),
            )
        })
        .collect();
    let effect = if writes {
        "changes the world (a side effect)"
    } else {
        "reads only"
    };
    let what = doc.map_or_else(
        || format!("The evaluation world's {name} tool"),
        |d| d.description.trim_end_matches('.').to_string(),
    );
    ToolSpec {
        name: name.into(),
        description: format!("{what}; it {effect}. Send only the arguments the task needs."),
        schema: json!({"type": "object", "properties": properties, "additionalProperties": false}),
        side_effects: writes,
        artifacts: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_a_step_or_remedy_uses_is_described() {
        let suite = Suite::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../suites/default"
        )))
        .expect("suite");
        let specs = described(&suite);
        let args_of = |tool: &str| -> BTreeSet<String> {
            specs
                .iter()
                .find(|s| s.name == tool)
                .and_then(|s| s.schema["properties"].as_object())
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        };
        for task in &suite.tasks {
            for step in &task.steps {
                let shown = args_of(&step.tool);
                for arg in step.args.keys() {
                    assert!(shown.contains(arg), "{}: {}.{arg}", task.id, step.tool);
                }
            }
        }
        assert!(args_of("http_get").contains("api"));
        // The shipped suites document every tool and argument their steps use: a model is
        // never shown the generic fallback.
        for spec in specs.iter().filter(|s| s.name != LOCATE) {
            assert!(
                !spec.description.starts_with("The evaluation world's"),
                "{} is undocumented",
                spec.name
            );
            for (name, property) in spec.schema["properties"].as_object().into_iter().flatten() {
                let text = property["description"].as_str().unwrap_or_default();
                assert!(
                    !text.ends_with("exactly as the goal or an earlier tool output states it")
                        || !text.starts_with(&format!("the {name} this call")),
                    "{}.{name} is undocumented",
                    spec.name
                );
            }
        }
        assert!(args_of(LOCATE).contains("ref"));
        for spec in &specs {
            for (name, property) in spec.schema["properties"].as_object().into_iter().flatten() {
                assert!(
                    property["description"]
                        .as_str()
                        .is_some_and(|d| d.len() > 10),
                    "{}.{name} has no description",
                    spec.name
                );
            }
        }
    }
}
