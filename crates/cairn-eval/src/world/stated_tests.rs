//! Rule 9's `invent_stated`: a call whose next step's arguments are all written in its input
//! invents at that rate; one that must compose them invents at `invent_base`.

use super::mind::Mind;
use super::truth_facts;
use crate::suite::{SlipRates, Suite, SuiteTask};
use cairn::engine::runtime::ports::Purpose;

fn account_task() -> SuiteTask {
    let suite: Suite = toml::from_str(
        r#"
name = "t"
[[tasks]]
id = "onboard"
category = "medium"
goal = "Create the account of dana@example.com and add it to team infra."
steps = [
  { id = "create", tool = "create_account", args = { email = "dana@example.com" }, reveals = { user = "u-50211" }, writes = true },
  { id = "team", tool = "add_to_team", args = { user = "{user}", team = "infra" }, writes = true },
]
"#,
    )
    .unwrap();
    suite.check().unwrap();
    suite.tasks[0].clone()
}

fn reply(task: &SuiteTask, context: &str, slips: SlipRates) -> String {
    let offered = [
        "create_account".to_string(),
        "add_to_team".into(),
        "lookup".into(),
    ];
    let mind = Mind {
        task,
        repeat: 0,
        seed: 7,
        guess_success: 0.0,
        gate_noise: 1,
        slips,
        context: context.to_string(),
        facts: truth_facts(task),
    };
    mind.reply(Purpose::Tactical, Some("reactive"), &offered)
        .to_string()
}

#[test]
fn a_call_whose_next_step_is_written_in_its_input_invents_at_the_stated_rate() {
    let task = account_task();
    let rates = SlipRates {
        invent_base: 1.0,
        invent_stated: Some(0.0),
        ..Default::default()
    };
    // The goal states the first step's argument: never invented.
    let goal = format!("{{\"goal\": \"{}\"}}", task.goal);
    let first = reply(&task, &goal, rates);
    assert!(
        first.contains("create_account") && !first.contains("invented-"),
        "{first}"
    );
    // A context that does not state it: invented at invent_base.
    let bare = reply(&task, "{\"goal\": \"onboard someone\"}", rates);
    assert!(bare.contains("invented-"), "{bare}");
    // Unset, invent_base applies whether or not the arguments are written.
    let pooled = SlipRates {
        invent_base: 1.0,
        ..Default::default()
    };
    assert!(reply(&task, &goal, pooled).contains("invented-"));
}

#[test]
fn an_argument_built_from_a_fact_is_written_once_an_output_showing_the_fact_is_in_context() {
    let task = account_task();
    let rates = SlipRates {
        invent_base: 1.0,
        invent_stated: Some(0.0),
        ..Default::default()
    };
    let receipt = super::Receipts {
        seed: 7,
        task: &task.id,
        repeat: 0,
    }
    .of("create");
    // The first step done, its output (the user id) shown: the second step is written.
    let shown = format!(
        "{{\"goal\": \"{}\", \"seen\": \"{receipt} user u-50211\"}}",
        task.goal
    );
    let second = reply(&task, &shown, rates);
    assert!(
        second.contains("add_to_team") && second.contains("u-50211"),
        "{second}"
    );
    // Done but its output not shown: the fact is not written, so the call invents.
    let hidden = format!("{{\"goal\": \"{}\", \"seen\": \"{receipt}\"}}", task.goal);
    assert!(reply(&task, &hidden, rates).contains("invented-"));
}

#[test]
fn an_argument_is_written_only_as_a_word_of_its_own() {
    let suite: Suite = toml::from_str(
        r#"
name = "t"
[[tasks]]
id = "lint"
category = "medium"
goal = "Run the lint of repo web."
steps = [
  { id = "lint", tool = "run_command", args = { host = "ci", cmd = "lint web" } },
]
"#,
    )
    .unwrap();
    let task = suite.tasks[0].clone();
    let rates = SlipRates {
        invent_base: 1.0,
        invent_stated: Some(0.0),
        ..Default::default()
    };
    let offered = ["run_command".to_string(), "lookup".into()];
    let reply = |context: &str| {
        Mind {
            task: &task,
            repeat: 0,
            seed: 7,
            guess_success: 0.0,
            gate_noise: 1,
            slips: rates,
            context: context.to_string(),
            facts: truth_facts(&task),
        }
        .reply(Purpose::Tactical, Some("reactive"), &offered)
        .to_string()
    };
    // "ci" inside "Decide" is not the host: not stated, so invented.
    assert!(reply("Decide. {\"goal\": \"lint web\"}").contains("invented-"));
    // Written as a word of its own, it is.
    assert!(!reply("{\"goal\": \"lint web on host ci\"}").contains("invented-"));
}

#[test]
fn a_call_whose_steps_are_all_done_invents_at_the_done_rate_and_one_with_no_steps_at_the_idle_rate()
{
    let task = account_task();
    let receipts = super::Receipts {
        seed: 7,
        task: &task.id,
        repeat: 0,
    };
    let done = format!(
        "{{\"goal\": \"{}\", \"seen\": \"{} user u-50211; {}\"}}",
        task.goal,
        receipts.of("create"),
        receipts.of("team")
    );
    let done_only = SlipRates {
        invent_done: Some(1.0),
        ..Default::default()
    };
    let idle_only = SlipRates {
        invent_idle: 1.0,
        invent_done: Some(0.0),
        ..Default::default()
    };
    // Both steps' receipts in context: the work is done, so `invent_done` applies, not
    // `invent_idle`.
    assert!(reply(&task, &done, done_only).contains("invented-"));
    let answered = reply(&task, &done, idle_only);
    assert!(!answered.contains("invented-"), "{answered}");
    // Unset, the done rate is the idle rate.
    let pooled = SlipRates {
        invent_idle: 1.0,
        ..Default::default()
    };
    assert!(reply(&task, &done, pooled).contains("invented-"));

    // A task with no steps has nothing done: the idle rate applies, not the done rate.
    let mut question = task.clone();
    question.steps.clear();
    let goal = format!("{{\"goal\": \"{}\"}}", question.goal);
    assert!(reply(&question, &goal, idle_only).contains("invented-"));
    assert!(!reply(&question, &goal, done_only).contains("invented-"));
}
