//! Every schema against the parser its answers go into, and every prompt's worked example
//! against its schema: what the grammar lets a model say, the engine can read.

use serde_json::{Value, json};

use super::*;
use crate::domain::gate::GateFeatures;
use crate::domain::plan::check::parse_verdict;
use crate::domain::plan::known::KnownTools;
use crate::domain::plan::validate::validate;
use crate::domain::plan::{Plan, StepList};
use crate::engine::prompts::{self, Prompt};

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "lookup".into(),
            description: "Look something up. Produces the artifact `findings`.".into(),
            schema: json!({"type": "object", "required": ["query"],
                           "properties": {"query": {"type": "string", "minLength": 1}},
                           "additionalProperties": false}),
            side_effects: false,
            artifacts: Vec::new(),
        },
        ToolSpec {
            name: "write_note".into(),
            description: "Write a note. Produces the artifact `note`.".into(),
            schema: json!({"type": "object", "required": ["title", "text"],
                           "properties": {"title": {"type": "string", "minLength": 1},
                                          "text": {"type": "string"}},
                           "additionalProperties": false}),
            side_effects: true,
            artifacts: Vec::new(),
        },
    ]
}

fn valid(schema: &Value, instance: &Value) -> Result<(), Vec<String>> {
    let validator = crate::schema::compile(schema).map_err(|e| vec![e])?;
    let errors = crate::schema::messages(&validator, instance);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn example(prompt: &Prompt, index: usize) -> Value {
    let text = prompt.examples().get(index).copied().unwrap_or_else(|| {
        panic!("prompt {} has no example {index}", prompt.name);
    });
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{}: example is not JSON: {e}", prompt.name))
}

#[test]
fn every_schema_compiles_and_every_prompt_has_a_worked_example() {
    let specs = tools();
    let refs: Vec<&ToolSpec> = specs.iter().collect();
    for schema in [
        gate(),
        strategic(&refs),
        tactical(&refs, false),
        direct(&refs),
        verdict(),
        one_shot(),
        reactive(&refs),
        v1(&refs),
        tactical(&[], false),
    ] {
        crate::schema::compile(&schema).expect("a schema");
    }
    for prompt in prompts::ALL {
        assert!(
            !prompt.examples().is_empty(),
            "{} has no example",
            prompt.name
        );
        assert!(prompt.version().starts_with(&format!("{}@", prompt.name)));
    }
}

#[test]
fn the_gate_example_validates_and_parses() {
    let answer = example(&prompts::GATE, 0);
    valid(&gate(), &answer).expect("valid");
    let features: GateFeatures = serde_json::from_value(answer).expect("parses");
    assert_eq!(features.est_tool_calls, 1);
    assert!(valid(&gate(), &json!({"est_tool_calls": "one"})).is_err());
}

#[test]
fn the_strategic_example_validates_parses_and_passes_plan_validation() {
    // The example's tools declare the artifacts its checks name, as the prompt says they do.
    let mut specs = tools();
    specs[0].artifacts = vec!["findings".into()];
    specs[1].artifacts = vec!["note".into()];
    let refs: Vec<&ToolSpec> = specs.iter().collect();
    let answer = example(&prompts::STRATEGIC, 0);
    valid(&strategic(&refs), &answer).expect("valid");
    let plan = Plan::from_value(&answer, 8).expect("parses");
    let known = KnownTools::new(specs.iter().map(|t| t.name.clone()))
        .with_artifacts(specs.iter().map(|t| (t.name.clone(), t.artifacts.clone())));
    validate(&plan, &known).expect("a valid plan");
}

#[test]
fn the_strategic_schema_refuses_the_shapes_a_small_model_invented() {
    let mut specs = tools();
    specs[0].artifacts = vec!["findings".into()];
    let schema = strategic(&specs.iter().collect::<Vec<_>>());
    let milestone = |accept: Value, tools: Value| {
        json!({"milestones": [{"id": "m1", "title": "t", "depends_on": [], "effort": 1,
                               "tools": tools, "outcome": "o", "accept": accept}]})
    };
    let artifact = json!({"type": "artifact", "name": "findings", "non_empty": true});
    assert!(valid(&schema, &milestone(artifact.clone(), json!(["lookup"]))).is_ok());
    // Measured against the real 1.5B model with no schema: `accept` as a string, checks as
    // strings, a schema check without its schema, an unregistered tool.
    assert!(
        valid(
            &schema,
            &milestone(json!("type:artifact"), json!(["lookup"]))
        )
        .is_err()
    );
    let no_schema = json!({"type": "schema", "artifact": "findings"});
    assert!(valid(&schema, &milestone(no_schema, json!(["lookup"]))).is_err());
    assert!(valid(&schema, &milestone(artifact, json!(["teleport"]))).is_err());
    let all = json!({"type": "all", "checks": ["artifact findings"]});
    assert!(valid(&schema, &milestone(all, json!(["lookup"]))).is_err());
}

#[test]
fn the_tactical_example_validates_and_parses_and_tools_are_constrained() {
    let specs = tools();
    let refs: Vec<&ToolSpec> = specs.iter().collect();
    let answer = example(&prompts::TACTICAL, 0);
    let schema = tactical(&refs, false);
    valid(&schema, &answer).expect("valid");
    let list: StepList = serde_json::from_value(answer.clone()).expect("parses");
    assert_eq!(list.steps[0].tool, "write_note");
    // Only the milestone's tools, and each with its own arguments.
    let only_lookup = tactical(&refs[..1], false);
    assert!(valid(&only_lookup, &answer).is_err());
    let bad_args = json!({"steps": [{"id": "s1", "tool": "write_note", "args": {"query": "x"},
                                     "expected_output": "x"}]});
    assert!(valid(&schema, &bad_args).is_err());
}

#[test]
fn the_direct_example_validates_as_steps_and_the_answer_as_done() {
    let specs = tools();
    let refs: Vec<&ToolSpec> = specs.iter().collect();
    let schema = direct(&refs);
    let answer = example(&prompts::DIRECT, 0);
    valid(&schema, &answer).expect("valid");
    let list: StepList = serde_json::from_value(answer).expect("parses");
    assert_eq!(list.steps[0].tool, "lookup");
    valid(&schema, &json!({"done": true, "answer": "alice"})).expect("an answer");
    assert!(valid(&schema, &json!({"done": false})).is_err());
}

#[test]
fn verdict_examples_validate_and_parse() {
    for prompt in [prompts::VERIFIER, prompts::CHECK_VERIFIER] {
        let answer = example(&prompt, 0);
        valid(&verdict(), &answer).expect("valid");
        parse_verdict(&answer).expect("parses");
    }
    assert!(valid(&verdict(), &json!({"verdict": "maybe", "reason": ""})).is_err());
}

#[test]
fn baseline_examples_validate() {
    let specs = tools();
    let refs: Vec<&ToolSpec> = specs.iter().collect();
    valid(&one_shot(), &example(&prompts::ONE_SHOT, 0)).expect("one_shot");
    valid(&reactive(&refs), &example(&prompts::REACTIVE, 0)).expect("reactive call");
    valid(&reactive(&refs), &example(&prompts::REACTIVE, 1)).expect("reactive done");
    let list = example(&prompts::V1, 0);
    valid(&v1(&refs), &list).expect("v1");
    serde_json::from_value::<StepList>(list).expect("v1 steps parse");
}

#[test]
fn command_checks_are_offered_only_over_runner_tools() {
    let specs = tools();
    let refs: Vec<&ToolSpec> = specs.iter().collect();
    let plan = |accept: Value| {
        json!({"milestones": [{"id": "m1", "title": "t", "depends_on": [], "effort": 1,
                               "tools": ["lookup"], "outcome": "o", "accept": accept}]})
    };
    // What the 0.5B model wrote: a `command` check calling the lookup tool.
    let lookup_as_command =
        json!({"type": "command", "tool": "lookup", "args": {}, "exit_code": 0});
    assert!(valid(&strategic(&refs), &plan(lookup_as_command)).is_err());
    let mut with_runner = tools();
    with_runner.push(ToolSpec {
        name: "run".into(),
        description: "Runs a command; answers its exit code.".into(),
        schema: json!({"type": "object"}),
        side_effects: true,
        artifacts: Vec::new(),
    });
    let refs: Vec<&ToolSpec> = with_runner.iter().collect();
    let make_test = json!({"type": "command", "tool": "run", "args": {"cmd": "make test"},
                           "exit_code": 0});
    valid(&strategic(&refs), &plan(make_test)).expect("a runner's command check");
    // The last direct round offers only the answer.
    valid(&direct(&[]), &json!({"done": true, "answer": "Paris"})).expect("an answer");
    assert!(valid(&direct(&[]), &example(&prompts::DIRECT, 0)).is_err());
}

#[test]
fn declared_artifacts_are_the_only_names_a_plans_check_may_use() {
    let plan = |accept: Value| {
        json!({"milestones": [{"id": "m1", "title": "t", "depends_on": [], "effort": 1,
                               "tools": ["lookup"], "outcome": "o", "accept": accept}]})
    };
    let version = json!({"type": "artifact", "name": "version", "non_empty": true});
    let findings = json!({"type": "schema", "artifact": "findings",
                          "schema": {"type": "object"}});
    // Undeclared: any name, as a model wrote it (plan amendment makes a name no granted tool
    // declares `steps_succeeded`); and the check the engine can always stand behind.
    let specs = tools();
    let refs: Vec<&ToolSpec> = specs.iter().collect();
    valid(&strategic(&refs), &plan(version.clone())).expect("any name");
    valid(&strategic(&refs), &plan(json!({"type": "steps_succeeded"}))).expect("steps");
    // Declared: only the declared names, in artifact and schema checks alike.
    let mut declaring = tools();
    declaring[0].artifacts = vec!["findings".into()];
    declaring[1].artifacts = vec!["note".into()];
    let refs: Vec<&ToolSpec> = declaring.iter().collect();
    let schema = strategic(&refs);
    assert!(valid(&schema, &plan(version)).is_err());
    valid(&schema, &plan(findings.clone())).expect("a declared name");
    let plan = Plan::from_value(&plan(findings), 10).expect("parses");
    let known = KnownTools::new(["lookup", "write_note"]).with_artifacts(
        declaring
            .iter()
            .map(|t| (t.name.clone(), t.artifacts.clone())),
    );
    assert_eq!(validate(&plan, &known), Ok(()));
}

#[test]
fn a_registry_where_some_tool_declares_nothing_keeps_any_name_open() {
    let mut mixed = tools();
    mixed[0].artifacts = vec!["findings".into()];
    let refs: Vec<&ToolSpec> = mixed.iter().collect();
    // write_note declares nothing: what it names its artifacts is unknown, so a milestone of
    // write_note's may still check an artifact by any name.
    let plan = json!({"milestones": [{"id": "m1", "title": "t", "depends_on": [], "effort": 1,
        "tools": ["write_note"], "outcome": "o",
        "accept": {"type": "artifact", "name": "sent", "non_empty": true}}]});
    valid(&strategic(&refs), &plan).expect("any name while a tool declares nothing");
    let known = KnownTools::new(["lookup", "write_note"])
        .with_artifacts(mixed.iter().map(|t| (t.name.clone(), t.artifacts.clone())));
    let parsed = Plan::from_value(&plan, 10).expect("parses");
    assert_eq!(validate(&parsed, &known), Ok(()));
}

#[test]
fn a_tool_granted_twice_is_one_branch_of_the_tactical_schema() {
    let specs = tools();
    let twice: Vec<&ToolSpec> = vec![&specs[0], &specs[1], &specs[0]];
    let step = json!({"steps": [{"id": "s1", "tool": "lookup", "args": {"query": "billing"},
                                 "expected_output": "the owner"}]});
    assert_eq!(valid(&tactical(&twice, false), &step), Ok(()));
}
