//! Rule 10: a plan's slips. A missed tool is granted to no milestone (and a milestone's call,
//! offered only its milestone's tools, cannot name it); a missed check names an artifact no
//! tool produces. Off, the plan is the one the phases give.

use serde_json::Value;

use super::mind::Mind;
use super::truth_facts;
use crate::suite::{SlipRates, Suite, SuiteTask};
use cairn::engine::runtime::ports::Purpose;

fn pipeline() -> SuiteTask {
    let suite: Suite = toml::from_str(
        r#"
name = "t"
[[tasks]]
id = "incident"
category = "medium"
goal = "Summarise incident INC-88: find its timeline, the root cause and write the report."
steps = [
  { id = "timeline", tool = "lookup", args = { incident = "INC-88" }, reveals = { window = "02:10-02:55" }, phase = "gather" },
  { id = "logs", tool = "search", args = { query = "errors {window}" }, reveals = { cause = "expired-cert" }, phase = "gather" },
  { id = "report", tool = "write_report", args = { incident = "INC-88", cause = "{cause}" }, writes = true, phase = "write" },
]
"#,
    )
    .unwrap();
    suite.check().unwrap();
    suite.tasks[0].clone()
}

fn offered() -> Vec<String> {
    ["lookup", "search", "write_report", "query_metrics"]
        .map(String::from)
        .to_vec()
}

fn mind(task: &SuiteTask, repeat: u32, slips: SlipRates, context: String) -> Mind<'_> {
    Mind {
        task,
        repeat,
        seed: 7,
        guess_success: 0.0,
        gate_noise: 1,
        slips,
        context,
        facts: truth_facts(task),
    }
}

fn granted(plan: &Value) -> Vec<String> {
    let mut tools: Vec<String> = plan["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tools"].as_array().unwrap().clone())
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    tools.sort();
    tools.dedup();
    tools
}

fn checked(plan: &Value) -> Vec<String> {
    plan["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["accept"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn without_plan_slips_every_tool_is_granted_and_every_check_names_a_last_step() {
    let task = pipeline();
    let plan = mind(&task, 0, SlipRates::default(), String::new()).reply(
        Purpose::Strategic,
        None,
        &offered(),
    );
    assert_eq!(granted(&plan), {
        let mut all = offered();
        all.sort();
        all
    });
    assert_eq!(checked(&plan), ["logs", "report"], "{plan}");
}

#[test]
fn a_missed_tool_is_granted_to_no_milestone_and_a_missed_check_names_no_artifact() {
    let task = pipeline();
    let always = SlipRates {
        plan_tool_miss: 1.0,
        plan_accept_miss: 1.0,
        ..Default::default()
    };
    let plan = mind(&task, 0, always, String::new()).reply(Purpose::Strategic, None, &offered());
    // Only the tool no step uses is left.
    assert_eq!(granted(&plan), ["query_metrics"], "{plan}");
    let steps: Vec<&str> = task.steps.iter().map(|s| s.id.as_str()).collect();
    assert!(
        checked(&plan)
            .iter()
            .all(|name| !steps.contains(&name.as_str())),
        "{plan}"
    );
}

#[test]
fn a_plan_misses_each_tool_at_its_rate_and_the_same_tools_when_asked_again() {
    let task = pipeline();
    let half = SlipRates {
        plan_tool_miss: 0.5,
        ..Default::default()
    };
    let plans: Vec<Value> = (0..60)
        .map(|r| mind(&task, r, half, String::new()).reply(Purpose::Strategic, None, &offered()))
        .collect();
    let missed = plans.iter().map(|p| 4 - granted(p).len()).sum::<usize>();
    // 3 step tools per plan, each missed at 0.5: about 90 of 180.
    assert!((60..=120).contains(&missed), "{missed} of 180 missed");
    // A replan (a longer context, the same task and repeat) misses the same tools.
    for (r, plan) in plans.iter().enumerate().take(10) {
        let again = mind(&task, r as u32, half, "a failed plan".into()).reply(
            Purpose::Strategic,
            None,
            &offered(),
        );
        assert_eq!(granted(plan), granted(&again));
    }
}

#[test]
fn a_milestone_call_names_only_the_tools_it_is_offered() {
    let task = pipeline();
    // The gather milestone is offered lookup and query_metrics: search was missed.
    let tools = ["lookup", "query_metrics"].map(String::from).to_vec();
    let list = mind(&task, 0, SlipRates::default(), "{\"goal\": \"...\"}".into()).reply(
        Purpose::Tactical,
        Some("gather"),
        &tools,
    );
    let steps = list["steps"].as_array().unwrap();
    // The lookup stands; in place of the search, an offered tool, and the list ends there.
    assert_eq!(steps.len(), 2, "{list}");
    assert_eq!(steps[0]["id"], "timeline");
    assert!(
        steps
            .iter()
            .all(|s| tools.contains(&s["tool"].as_str().unwrap().to_string())),
        "{list}"
    );
    // Offered only another step's tool, it calls that one with invented arguments.
    let other = mind(&task, 0, SlipRates::default(), String::new()).reply(
        Purpose::Tactical,
        Some("write"),
        &["lookup".to_string()],
    );
    assert_eq!(other["steps"][0]["tool"], "lookup", "{other}");
    assert!(
        other["steps"][0]["args"].to_string().contains("invented-"),
        "{other}"
    );
}

#[test]
fn where_the_input_shows_declared_artifacts_a_check_names_its_last_steps_tool() {
    let task = pipeline();
    let shown = |tools: &[&str]| {
        let families: Vec<Value> = tools
            .iter()
            .map(|t| serde_json::json!({"name": t, "artifacts": [t]}))
            .collect();
        serde_json::json!({"goal": task.goal, "tools": families}).to_string()
    };
    let declared = shown(&["lookup", "search", "write_report", "query_metrics"]);
    let plan = mind(&task, 0, SlipRates::default(), declared.clone()).reply(
        Purpose::Strategic,
        None,
        &offered(),
    );
    assert_eq!(checked(&plan), ["search", "write_report"], "{plan}");
    // A missed check names another granted tool's declared artifact: it names a real
    // artifact, which this milestone's steps do not produce.
    let missing = SlipRates {
        plan_accept_miss: 1.0,
        ..Default::default()
    };
    let plan = mind(&task, 0, missing, declared).reply(Purpose::Strategic, None, &offered());
    assert_eq!(checked(&plan), ["write_report", "lookup"], "{plan}");
}
