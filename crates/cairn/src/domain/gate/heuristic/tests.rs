use super::*;
use crate::domain::gate::{GateThresholds, Route, route};

fn f(goal: &str) -> GateFeatures {
    heuristic_features(goal, &[])
}

#[test]
fn the_worked_example_is_planned() {
    let x = f("Rename config key db.url to db.dsn in services A, B, C");
    assert!(x.touches_writes);
    assert_eq!(x.targets, 3);
    assert_eq!(x.goal_kind, "change");
    assert_eq!(route(x, &GateThresholds::default()).route, Route::Plan);
}

#[test]
fn a_one_tool_question_goes_direct() {
    let x = f("What is the current version of the payments service?");
    assert!(!x.touches_writes, "{x:?}");
    // "current" asks about the world now: one read, though no action verb is named.
    assert_eq!(
        (x.targets, x.est_tool_calls, x.goal_kind.as_str()),
        (1, 1, "lookup")
    );
    let x = crate::domain::gate::combine(None, &x);
    assert_eq!(x.est_tool_calls, 1);
    // Direct once the kind has a good record (no record: planned, see gate_tests.rs).
    let known = GateFeatures {
        direct_history: Some(crate::domain::gate::DirectHistory {
            successes: 20,
            total: 20,
        }),
        ..x
    };
    assert_eq!(
        route(known, &GateThresholds::default()).route,
        Route::Direct
    );
}

#[test]
fn the_destructive_goal_touches_writes_and_several_targets() {
    let x = f("Delete the production database db-main and drop all its tables");
    assert!(x.touches_writes);
    assert!(x.targets >= 2, "{x:?}");
    assert_eq!(x.goal_kind, "change");
    for goal in [
        "wipe the staging bucket",
        "terminate instance i-123",
        "shutdown host db-2",
        "kill the stuck job",
        "restart the api",
        "truncate table events",
        "transfer 100 EUR to ACME",
        "Purge the CDN cache",
        "rm the temp files",
        "Can you delete the old backups?",
    ] {
        assert!(f(goal).touches_writes, "{goal}");
    }
}

#[test]
fn a_state_asked_about_is_not_a_write() {
    for goal in [
        "Which version of the billing service is deployed?",
        "What was deleted from bucket logs yesterday?",
        "Is the profiler installed on host h1?",
    ] {
        assert!(!f(goal).touches_writes, "{goal}");
    }
    // Not a question: the same words are an instruction to bring the state about.
    assert!(f("Make sure the old backups are deleted").touches_writes);
    // A registered writer named as a state in a question is no action either (the live 1.5B
    // planner answered this question with a deploy); asked as an action, it is one.
    let tools = ["deploy", "write_report"];
    let asked = "Which version of the billing service is deployed?";
    assert!(!heuristic_features(asked, &tools).touches_writes);
    assert!(heuristic_features("Can you deploy build 42 of the frontend?", &tools).touches_writes);
}

#[test]
fn a_goal_that_touches_a_side_effecting_tool_touches_writes() {
    let tools = ["drop_table", "ledger-post"];
    assert!(heuristic_features("get rid of the tables via drop_table", &tools).touches_writes);
    assert!(
        heuristic_features("the legacy table should go: drop table legacy", &[]).touches_writes
    );
    assert!(heuristic_features("Post the totals to the ledger", &tools).touches_writes);
    assert!(!heuristic_features("Show the ledger totals", &tools).touches_writes);
}

#[test]
fn write_verbs_in_any_form_touch_writes() {
    for goal in [
        "Deploy the new build",
        "delete old logs",
        "Send the weekly report",
        "pay invoice 42",
        "the file was edited",
        "patching the config",
        "stopped containers need cleanup",
        "Email has been sent to Bob",
        "Updating the docs",
        "we paid twice",
    ] {
        assert!(f(goal).touches_writes, "{goal}");
    }
    for goal in [
        "What is the payload size?",
        "list the senders",
        "how much did we spend",
        "Editorial guidelines summary",
    ] {
        assert!(!f(goal).touches_writes, "{goal}");
    }
    assert!(heuristic_features("use wire_funds for the vendor", &["wire_funds"]).touches_writes);
}

#[test]
fn targets_are_counted_from_enumerations_and_quantities() {
    assert_eq!(f("Check services A, B and C").targets, 3);
    assert_eq!(f("check the files a.py and b/c.py for TODOs").targets, 2);
    assert_eq!(f("summarize 12 documents").targets, 12);
    assert_eq!(f("look at three repos").targets, 3);
    assert_eq!(f("check every service? no: all services").targets, 2);
    assert_eq!(
        f("Compare the weather in Paris, London and Rome").targets,
        3
    );
    assert_eq!(f("Check service A").targets, 1);
    assert_eq!(
        f("what is 2 and 2").targets,
        2,
        "numbers look like names: errs to plan"
    );
    assert_eq!(f("find the bug and explain it").targets, 1);
}

#[test]
fn tool_calls_scale_with_actions_and_targets() {
    assert_eq!(
        f("find the failing test, run it and summarize the error").est_tool_calls,
        3
    );
    assert_eq!(f("Check services A, B and C").est_tool_calls, 3);
    assert_eq!(
        f("fetch and compare files a.txt and b.txt").est_tool_calls,
        4
    );
}

#[test]
fn goal_targets_are_the_names_after_a_target_noun() {
    assert_eq!(
        goal_targets("Look up who owns services A and B, then write a note to each owner"),
        vec!["A", "B"]
    );
    assert_eq!(
        goal_targets(
            "First look up who owns service C. Then ... Finally look up who owns service A."
        ),
        vec!["C", "A"]
    );
    assert_eq!(
        goal_targets("Rename config key db.url to db.dsn in services A, B, C"),
        vec!["A", "B", "C"]
    );
    assert!(goal_targets("Which version of the billing service is deployed?").is_empty());
    assert!(goal_targets("What is the capital of France?").is_empty());
    assert!(goal_targets("Convert the customer CSV export to JSON lines").is_empty());
}

/// The inflections `verb_form` accepts, spelled out as the definition reads.
fn spelled_forms(verb: &str) -> Vec<String> {
    let stem = verb.strip_suffix('e').unwrap_or(verb);
    let mut forms = vec![
        verb.to_string(),
        format!("{verb}s"),
        format!("{verb}es"),
        format!("{verb}d"),
        format!("{stem}ed"),
        format!("{stem}ing"),
    ];
    if let Some(last) = verb.chars().last().filter(|_| stem == verb) {
        forms.push(format!("{verb}{last}ed"));
        forms.push(format!("{verb}{last}ing"));
    }
    forms
}

#[test]
fn verb_form_accepts_exactly_the_spelled_out_inflections() {
    let verbs: Vec<&str> = WRITE_VERBS.iter().chain(READ_VERBS).copied().collect();
    let mut words: Vec<String> = verbs.iter().flat_map(|v| spelled_forms(v)).collect();
    // Near misses: a letter too many or too few, another suffix, another verb's forms.
    let near: Vec<String> = words
        .iter()
        .flat_map(|w| {
            [
                format!("{w}x"),
                w[..w.len() - 1].to_string(),
                format!("{w}er"),
            ]
        })
        .collect();
    words.extend(near);
    for verb in &verbs {
        let forms = spelled_forms(verb);
        for word in &words {
            assert_eq!(
                verb_form(word, verb),
                forms.contains(word),
                "verb {verb:?}, word {word:?}"
            );
        }
    }
}

#[test]
fn quoted_text_is_material_not_the_goal() {
    // Measured live: the quoted "restart" made a rewrite a change to plan.
    let x = f("Rewrite more clearly: \"pls restart svc asap its down\".");
    assert!(!x.touches_writes, "{x:?}");
    assert_eq!((x.targets, x.goal_kind.as_str()), (1, "task"));
    let x = heuristic_features(
        "Summarise \u{201c}restart_service failed\u{201d}",
        &["restart_service"],
    );
    assert!(!x.touches_writes, "{x:?}");
    // A quoted text is still an object: the verb before it acts on it.
    let x = f("Post \"deploy done\" to the ops channel");
    assert!(x.touches_writes, "{x:?}");
    // Names inside quotes are no targets.
    assert!(goal_targets("Translate \"restart services A and B\"").is_empty());
    assert_eq!(goal_targets("Restart services A and B"), ["A", "B"]);
}
