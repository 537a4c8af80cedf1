//! The fair suite's world: faults that fire whatever the arguments and state their remedy,
//! per-task tools with distractors offered to the engine, and documented artifacts.

use serde_json::{Value, json};

use super::perform::perform;
use super::{Receipts, TaskWorld, specs, truth_facts};
use crate::suite::{Profile, Suite, SuiteTask};

const SUITE: &str = r#"
name = "fair"
[world.slips]
invent_base = 0.9
[tools.find_user]
description = "Finds a user by email"
args = { email = "the email address, as the goal states it" }
declares_artifact = true
[tools.delete_user]
description = "Deletes a user"
args = { user = "the user id" }
side_effects = true
[[tasks]]
id = "moved"
category = "uncertain"
goal = "Find the user dana@example.com and add her to team infra."
tools = ["find_user", "add_to_team", "delete_user"]
steps = [
  { id = "find", tool = "find_user", args = { email = "dana@example.com" }, reveals = { user = "u-73519" } },
  { id = "team", tool = "add_to_team", args = { user = "{user}", team = "infra" }, writes = true },
]
fault = { kind = "unexpected_response", step = "find", fires = "any_args" }
"#;

fn suite() -> Suite {
    let suite: Suite = toml::from_str(SUITE).unwrap();
    suite.check().unwrap();
    suite
}

fn call(task: &SuiteTask, world: &mut TaskWorld, tool: &str, args: Value) -> Value {
    let receipts = Receipts {
        seed: 7,
        task: &task.id,
        repeat: 0,
    };
    let reply = perform(task, world, &receipts, (tool, &args), false).unwrap();
    json!({"error": reply.error, "output": reply.output})
}

#[test]
fn a_fault_that_fires_whatever_the_arguments_states_its_remedy() {
    let suite = suite();
    let task = &suite.tasks[0];
    let mut world = TaskWorld {
        facts: truth_facts(task),
        ..TaskWorld::default()
    };
    // Wrong arguments still meet the fault, and its answer says how to recover.
    let reply = call(task, &mut world, "find_user", json!({"email": "dana"}));
    assert_eq!(reply["output"]["status"], "moved", "{reply}");
    assert_eq!(reply["output"]["remedy"], "call again with api = \"v2\"");
    assert_eq!(world.fault_hits, 1);
    // The remedy with the right arguments performs the step.
    let reply = call(
        task,
        &mut world,
        "find_user",
        json!({"email": "Dana@example.com", "api": "v2"}),
    );
    assert_eq!(reply["output"]["user"], "u-73519", "{reply}");
    assert_eq!(world.performed.get("find"), Some(&1));
}

#[test]
fn a_suite_task_offers_its_own_tools_and_each_declares_artifacts_as_documented() {
    let suite = suite();
    let tools = specs::all_tools(&suite);
    assert_eq!(
        tools.get("delete_user"),
        Some(&true),
        "a writing distractor"
    );
    assert_eq!(tools.get("add_to_team"), Some(&true));
    assert!(tools.contains_key(super::LOCATE));
    let described = specs::described(&suite);
    let find = described.iter().find(|s| s.name == "find_user").unwrap();
    assert_eq!(find.artifacts, vec!["find_user".to_string()]);
    let team = described.iter().find(|s| s.name == "add_to_team").unwrap();
    assert!(team.artifacts.is_empty(), "undocumented: declares none");
    let delete = described.iter().find(|s| s.name == "delete_user").unwrap();
    assert!(
        delete.schema["properties"].get("user").is_some(),
        "{}",
        delete.schema
    );
}

#[test]
fn a_task_list_must_offer_every_tool_its_steps_use() {
    let broken = SUITE.replace(
        r#"tools = ["find_user", "add_to_team", "delete_user"]"#,
        r#"tools = ["find_user", "delete_user"]"#,
    );
    let suite: Suite = toml::from_str(&broken).unwrap();
    let error = suite.check().unwrap_err().to_string();
    assert!(error.contains("does not offer add_to_team"), "{error}");
    let undocumented = SUITE.replace(r#""delete_user"]"#, r#""drop_db"]"#);
    let suite: Suite = toml::from_str(&undocumented).unwrap();
    let error = suite.check().unwrap_err().to_string();
    assert!(error.contains("drop_db"), "{error}");
}

#[test]
fn the_competent_profile_never_slips() {
    let mut suite = suite();
    assert!(suite.world.slips.invent_base > 0.0);
    Profile::Competent.apply(&mut suite.world);
    assert_eq!(suite.world.slips, crate::suite::SlipRates::default());
}
