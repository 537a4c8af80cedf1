//! The world's truth rules: order is enforced, receipts carry a nonce only tools give out,
//! and the gate's estimate is noisy within its stated bound.

use serde_json::{Value, json};

use super::mind::Mind;
use super::perform::perform;
use super::{Receipts, TaskWorld, truth_facts};
use crate::suite::{Suite, SuiteTask};
use cairn::engine::runtime::ports::Purpose;

fn vm_task() -> SuiteTask {
    let suite: Suite = toml::from_str(
        r#"
name = "t"
[[tasks]]
id = "vm"
category = "medium"
goal = "Create a VM, install the profiler on it and collect a CPU profile."
steps = [
  { id = "vm", tool = "create_vm", args = { image = "base" }, reveals = { vm = "vm-31a" }, writes = true, phase = "provision" },
  { id = "install", tool = "run_command", args = { host = "{vm}", cmd = "install profiler" }, writes = true, phase = "install" },
  { id = "profile", tool = "run_command", args = { host = "{vm}", cmd = "profile cpu" }, phase = "collect", after = ["install"] },
]
"#,
    )
    .unwrap();
    suite.check().unwrap();
    suite.tasks[0].clone()
}

/// The tools a call about the VM task offers (a call can name only offered tools).
fn vm_tools() -> Vec<String> {
    vec!["create_vm".into(), "run_command".into()]
}

const RECEIPTS: Receipts<'static> = Receipts {
    seed: 7,
    task: "vm",
    repeat: 0,
};

fn call(task: &SuiteTask, world: &mut TaskWorld, tool: &str, args: Value) -> (bool, Value) {
    let reply = perform(task, world, &RECEIPTS, (tool, &args), false).unwrap();
    (
        reply.error.is_none(),
        json!({"error": reply.error, "output": reply.output}),
    )
}

fn fresh(task: &SuiteTask) -> TaskWorld {
    TaskWorld {
        facts: truth_facts(task),
        ..TaskWorld::default()
    }
}

#[test]
fn a_step_before_its_prerequisite_fails_even_with_the_right_arguments() {
    let task = vm_task();
    let mut world = fresh(&task);
    // The right host, guessed: the VM does not exist yet.
    let (ok, reply) = call(
        &task,
        &mut world,
        "run_command",
        json!({"host": "vm-31a", "cmd": "install profiler"}),
    );
    assert!(!ok, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("vm has not happened"),
        "{reply}"
    );
    assert!(call(&task, &mut world, "create_vm", json!({"image": "base"})).0);
    // Profiling before the profiler is installed fails too (an `after` prerequisite).
    let (ok, reply) = call(
        &task,
        &mut world,
        "run_command",
        json!({"host": "vm-31a", "cmd": "profile cpu"}),
    );
    assert!(!ok, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("install has not happened")
    );
    assert!(
        call(
            &task,
            &mut world,
            "run_command",
            json!({"host": "vm-31a", "cmd": "install profiler"})
        )
        .0
    );
    assert!(
        call(
            &task,
            &mut world,
            "run_command",
            json!({"host": "vm-31a", "cmd": "profile cpu"})
        )
        .0
    );
    assert_eq!(world.misordered, 2);
    assert_eq!(world.performed.len(), 3);
}

fn mind<'a>(task: &'a SuiteTask, context: String) -> Mind<'a> {
    Mind {
        task,
        repeat: 0,
        seed: 7,
        guess_success: 0.5,
        gate_noise: 1,
        slips: Default::default(),
        context,
        facts: truth_facts(task),
    }
}

#[test]
fn only_a_tool_output_carries_a_receipt_the_model_believes() {
    let task = vm_task();
    let mut world = fresh(&task);
    let (_, reply) = call(&task, &mut world, "create_vm", json!({"image": "base"}));
    let receipt = reply["output"]["receipt"].as_str().unwrap().to_string();
    assert!(
        receipt.starts_with("done:vm#") && receipt.len() > "done:vm#".len(),
        "{receipt}"
    );
    // A plan's text naming the receipt is not the receipt: the verifier still finds vm missing.
    let written = mind(&task, r#"{"outcome": "receipt done:vm"}"#.into());
    let verdict = written.reply(Purpose::Verifier, None, &[]);
    assert_eq!(verdict["verdict"], "fail", "{verdict}");
    let seen = mind(&task, format!("{{\"observations\": [{reply}]}}"));
    let verdict = seen.reply(Purpose::Verifier, None, &[]);
    assert!(
        verdict["reason"]
            .as_str()
            .unwrap()
            .contains("install, profile"),
        "{verdict}"
    );
}

#[test]
fn the_plan_states_every_prerequisite_and_the_gate_estimate_stays_within_its_noise() {
    let task = vm_task();
    let plan = mind(&task, String::new()).reply(Purpose::Strategic, None, &[]);
    let collect = &plan["milestones"][2];
    assert_eq!(collect["id"], "collect");
    let deps: Vec<&str> = collect["depends_on"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(deps, vec!["install", "provision"]);
    let mut seen = std::collections::BTreeSet::new();
    for repeat in 0..20 {
        let mut m = mind(&task, String::new());
        m.repeat = repeat;
        let gate = m.reply(Purpose::Gate, None, &[]);
        let estimate = gate["est_tool_calls"].as_i64().unwrap();
        assert!((2..=4).contains(&estimate), "{gate}");
        seen.insert(estimate);
        assert_eq!(gate["goal_kind"], "change");
    }
    assert!(seen.len() > 1, "the estimate is noisy: {seen:?}");
}

fn slipping<'a>(task: &'a SuiteTask, context: String, slips: crate::suite::SlipRates) -> Mind<'a> {
    Mind {
        slips,
        ..mind(task, context)
    }
}

#[test]
fn with_every_step_unnamed_a_stopping_model_says_done_and_a_list_is_cut() {
    let task = vm_task();
    let always = crate::suite::SlipRates {
        stop_base: 1.0,
        ..Default::default()
    };
    let reactive = slipping(&task, "{\"goal\": \"...\"}".into(), always);
    let reply = reactive.reply(Purpose::Tactical, Some("reactive"), &vm_tools());
    assert_eq!(reply["done"], true, "{reply}");
    let v1 = reactive.reply(Purpose::Strategic, Some("v1"), &vm_tools());
    assert_eq!(v1["steps"].as_array().unwrap().len(), 1, "{v1}");
    // No slips by default: the same call proposes the first step.
    let calm = mind(&task, "{\"goal\": \"...\"}".into());
    assert_eq!(
        calm.reply(Purpose::Tactical, Some("reactive"), &vm_tools())["id"],
        "vm"
    );
    assert_eq!(
        calm.reply(Purpose::Strategic, Some("v1"), &vm_tools())["steps"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn unnamed_pending_steps_raise_the_chances_and_a_refusal_teaches_the_order() {
    let task = vm_task();
    let rates = crate::suite::SlipRates {
        stop_per_unwritten: 0.1,
        misorder_per_unwritten: 0.5,
        ..Default::default()
    };
    assert!((rates.stop(3, 0) - 0.3).abs() < 1e-9);
    assert_eq!(rates.misorder(3), 1.0);
    let bare = slipping(&task, "{\"goal\": \"...\"}".into(), rates);
    assert_eq!(bare.unwritten(&task.steps.iter().collect::<Vec<_>>()), 3);
    // A plan in the input names the milestones: nothing is unwritten.
    let planned = slipping(
        &task,
        "{\"milestones\": [{\"id\": \"provision\"}, {\"id\": \"install\"}, {\"id\": \"collect\"}]}"
            .into(),
        rates,
    );
    assert_eq!(planned.unwritten(&task.steps.iter().collect::<Vec<_>>()), 0);
    let misorder = crate::suite::SlipRates {
        misorder_per_unwritten: 1.0,
        ..Default::default()
    };
    let skipping = slipping(&task, "{\"goal\": \"...\"}".into(), misorder);
    assert_eq!(
        skipping.reply(Purpose::Tactical, Some("reactive"), &vm_tools())["id"],
        "install"
    );
    let taught = slipping(
        &task,
        "{\"error\": \"(signal order:install)\"}".into(),
        misorder,
    );
    assert_eq!(
        taught.reply(Purpose::Tactical, Some("reactive"), &vm_tools())["id"],
        "vm"
    );
}

#[test]
fn an_answer_states_a_fact_in_its_own_words_but_not_a_different_one() {
    use super::perform::states;
    assert!(states("The capital is Canberra.", "Canberra"));
    assert!(states(
        "The billing service is deployed version 4.2.1.",
        "billing-4.2.1"
    ));
    assert!(states("Team Quokka owns the search service", "team-quokka"));
    assert!(!states("The billing service runs 4.2.0", "billing-4.2.1"));
    assert!(!states("version 4.2.1", "billing-4.2.1"));
    assert!(!states("", "Canberra"));
}

#[test]
fn an_invented_call_is_judged_a_slip_changes_nothing_and_is_repeated_as_its_rate_says() {
    let task = vm_task();
    let rates = |idle: f64, base: f64, repeat: f64| crate::suite::SlipRates {
        invent_idle: idle,
        invent_base: base,
        invent_repeat: repeat,
        ..Default::default()
    };
    let goal = "{\"goal\": \"...\"}".to_string();
    let offered = [
        "create_vm".to_string(),
        "lookup".into(),
        "run_command".into(),
    ];
    // A tool no step uses, when one is offered; the judge calls it `other`.
    let inventing = slipping(&task, goal.clone(), rates(0.0, 1.0, 0.0));
    let reply = inventing.reply(Purpose::Tactical, Some("reactive"), &offered);
    assert_eq!(reply["tool"], "lookup", "{reply}");
    assert_eq!(reply["args"]["query"], "invented-0", "{reply}");
    assert_eq!(inventing.judge(&reply).first, super::Verdict::Other);
    // Only the steps' tools offered: the next step's tool with invented arguments.
    let own = ["create_vm".to_string(), "run_command".into()];
    let list = inventing.reply(Purpose::Strategic, Some("v1"), &own);
    let steps = list["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{list}");
    assert_eq!(steps[0]["args"]["image"], "invented-0", "{list}");
    assert_eq!(inventing.judge(&list).first, super::Verdict::WrongArgs);
    let mut world = fresh(&task);
    let (ok, _) = call(&task, &mut world, "create_vm", steps[0]["args"].clone());
    assert!(!ok);
    assert!(world.performed.is_empty());
    // Seen in context: made again at `invent_repeat` 1, not at 0.
    let seen = format!("{goal}{reply}");
    let stuck = slipping(&task, seen.clone(), rates(0.0, 0.0, 1.0));
    let again = stuck.reply(Purpose::Tactical, Some("reactive"), &offered);
    assert_eq!(again, reply);
    let free = slipping(&task, seen, rates(0.0, 0.0, 0.0));
    assert_eq!(
        free.reply(Purpose::Tactical, Some("reactive"), &offered)["id"],
        "vm"
    );
    // Nothing pending: `invent_idle` turns the answer into a needless call.
    let receipts: String = ["vm", "install", "profile"]
        .iter()
        .map(|s| RECEIPTS.of(s))
        .collect();
    let finished = slipping(&task, receipts.clone(), rates(1.0, 0.0, 0.0));
    let needless = finished.reply(Purpose::Tactical, Some("reactive"), &offered);
    assert_eq!(needless["tool"], "lookup", "{needless}");
    let answering = slipping(&task, receipts, rates(0.0, 1.0, 0.0));
    let done = answering.reply(Purpose::Tactical, Some("reactive"), &offered);
    assert_eq!(done["done"], true, "{done}");
}

#[test]
fn a_planner_asked_about_a_goal_no_step_serves_plans_an_invented_call_at_its_rate() {
    let suite: Suite = toml::from_str(
        "name = \"k\"\n[[tasks]]\nid = \"q\"\ncategory = \"simple\"\ngoal = \"Capital?\"\nanswer = \"Canberra\"\n",
    )
    .unwrap();
    let task = suite.tasks[0].clone();
    let offered = ["lookup".to_string()];
    let calm = mind(&task, String::new());
    let plan = calm.reply(Purpose::Strategic, None, &offered);
    assert_eq!(plan["milestones"], json!([]), "{plan}");
    let rates = crate::suite::SlipRates {
        invent_idle: 1.0,
        ..Default::default()
    };
    let inventing = slipping(&task, String::new(), rates);
    let plan = inventing.reply(Purpose::Strategic, None, &offered);
    assert_eq!(plan["milestones"][0]["tools"], json!(["lookup"]), "{plan}");
}

#[test]
fn a_single_move_invents_at_the_move_rates_and_a_list_at_the_list_rates() {
    let task = vm_task();
    let goal = "{\"goal\": \"...\"}".to_string();
    let offered = ["create_vm".to_string(), "lookup".into()];
    // Lists always invent, moves never.
    let rates = crate::suite::SlipRates {
        invent_idle: 1.0,
        invent_base: 1.0,
        invent_move_idle: Some(0.0),
        invent_move_base: Some(0.0),
        ..Default::default()
    };
    let split = slipping(&task, goal.clone(), rates);
    let list = split.reply(Purpose::Strategic, Some("v1"), &offered);
    assert_eq!(list["steps"][0]["tool"], "lookup", "{list}");
    let step = split.reply(Purpose::Tactical, Some("reactive"), &offered);
    assert_eq!(step["id"], "vm", "{step}");
    // Unset, the list rates apply to moves too.
    let pooled = crate::suite::SlipRates {
        invent_base: 1.0,
        ..Default::default()
    };
    let step = slipping(&task, goal, pooled).reply(Purpose::Tactical, Some("reactive"), &offered);
    assert_eq!(step["tool"], "lookup", "{step}");
}

#[test]
fn a_list_that_starts_right_ends_at_an_invented_later_call_at_its_rate() {
    let task = vm_task();
    let goal = "{\"goal\": \"...\"}".to_string();
    let offered = [
        "create_vm".to_string(),
        "run_command".into(),
        "lookup".into(),
    ];
    let later = |rate| crate::suite::SlipRates {
        invent_later: rate,
        ..Default::default()
    };
    let whole =
        slipping(&task, goal.clone(), later(0.0)).reply(Purpose::Strategic, Some("v1"), &offered);
    assert_eq!(whole["steps"].as_array().map(Vec::len), Some(3), "{whole}");
    // Always: the first step stands, the second is an invented call, and the list ends.
    let cut = slipping(&task, goal, later(1.0)).reply(Purpose::Strategic, Some("v1"), &offered);
    let steps = cut["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), 2, "{cut}");
    assert_eq!(
        (steps[0]["id"].as_str(), steps[1]["tool"].as_str()),
        (Some("vm"), Some("lookup"))
    );
}
