//! Slip draws are independent across the scopes of one task: two milestones, each with one
//! step pending, do not share their chance of an invented list.

use super::mind::Mind;
use super::truth_facts;
use crate::suite::{SlipRates, Suite, SuiteTask};
use cairn::engine::runtime::ports::Purpose;

fn three_phases() -> SuiteTask {
    let suite: Suite = toml::from_str(
        r#"
name = "t"
[[tasks]]
id = "offboard"
category = "medium"
goal = "Offboard lee: disable the account, revoke her tokens and archive her mailbox."
steps = [
  { id = "disable", tool = "disable_account", args = { email = "lee@example.com" }, writes = true, phase = "disable" },
  { id = "revoke", tool = "revoke_tokens", args = { email = "lee@example.com" }, writes = true, phase = "revoke" },
  { id = "archive", tool = "archive_mailbox", args = { email = "lee@example.com" }, writes = true, phase = "archive" },
]
"#,
    )
    .unwrap();
    suite.check().unwrap();
    suite.tasks[0].clone()
}

#[test]
fn two_milestones_of_a_task_draw_their_invented_lists_apart() {
    let task = three_phases();
    let offered = [
        "disable_account".to_string(),
        "revoke_tokens".into(),
        "archive_mailbox".into(),
        "lookup".into(),
    ];
    let invents = |repeat: u32, milestone: &str| {
        let mind = Mind {
            task: &task,
            repeat,
            seed: 7,
            guess_success: 0.0,
            gate_noise: 1,
            slips: SlipRates {
                invent_base: 0.5,
                ..Default::default()
            },
            context: format!("{{\"goal\": \"...\", \"milestone\": \"{milestone}\"}}"),
            facts: truth_facts(&task),
        };
        let reply = mind.reply(Purpose::Tactical, Some(milestone), &offered);
        reply.to_string().contains("invented-")
    };
    // The same scope in the same context draws alike.
    assert!((0..20).all(|r| invents(r, "revoke") == invents(r, "revoke")));
    // Two scopes: at 0.5 each, about half of the repeats differ (none did when draws were
    // keyed by the number of pending steps, one for each milestone here).
    let differ = (0..40)
        .filter(|&r| invents(r, "disable") != invents(r, "revoke"))
        .count();
    assert!((8..=32).contains(&differ), "{differ} of 40 repeats differ");
    let invented = (0..40).filter(|&r| invents(r, "archive")).count();
    assert!((8..=32).contains(&invented), "{invented} of 40 invented");
}
