use super::*;
use serde_json::json;

fn check(value: Value) -> Check {
    serde_json::from_value(value).unwrap()
}

fn artifacts(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn wire_shapes_round_trip() {
    for value in [
        json!({"type": "artifact", "name": "usage_list", "non_empty": true}),
        json!({"type": "schema", "artifact": "report", "schema": {"type": "object"}}),
        json!({"type": "command", "tool": "run", "args": {"cmd": "make test"}, "exit_code": 0}),
        json!({"type": "verifier", "prompt": "Is the summary faithful?"}),
        json!({"type": "all", "checks": [{"type": "verifier", "prompt": "p"}]}),
    ] {
        assert_eq!(serde_json::to_value(check(value.clone())).unwrap(), value);
    }
    // Defaults: non_empty true, args {}, exit_code 0.
    assert_eq!(
        check(json!({"type": "artifact", "name": "x"})),
        Check::Artifact {
            name: "x".into(),
            non_empty: true
        }
    );
    assert_eq!(
        check(json!({"type": "command", "tool": "run"})),
        Check::Command {
            tool: "run".into(),
            args: json!({}),
            exit_code: 0
        }
    );
    assert!(serde_json::from_value::<Check>(json!({"type": "vibes"})).is_err());
}

#[test]
fn artifact_checks_need_presence_and_content() {
    let c = check(json!({"type": "artifact", "name": "usage_list", "non_empty": true}));
    let none = BTreeMap::new();
    let outcome = evaluate(&c, &artifacts(&[]), &none);
    assert!(!outcome.passed);
    assert_eq!(
        outcome.failures,
        vec!["artifact \"usage_list\" was not produced (the steps produced no artifact)"]
    );
    let other = evaluate(&c, &artifacts(&[("account", json!("u-1"))]), &none);
    assert_eq!(
        other.failures,
        vec!["artifact \"usage_list\" was not produced (produced: account)"]
    );
    for empty in [json!(null), json!(""), json!([]), json!({})] {
        assert!(!evaluate(&c, &artifacts(&[("usage_list", empty)]), &none).passed);
    }
    let ok = evaluate(&c, &artifacts(&[("usage_list", json!(["a.py"]))]), &none);
    assert_eq!(
        ok,
        CheckOutcome {
            passed: true,
            evidence: Evidence::Programmatic,
            failures: vec![]
        }
    );
    let lax = check(json!({"type": "artifact", "name": "x", "non_empty": false}));
    assert!(evaluate(&lax, &artifacts(&[("x", json!([]))]), &none).passed);
}

#[test]
fn schema_checks_validate_the_artifact() {
    let c = check(json!({"type": "schema", "artifact": "report",
        "schema": {"type": "object", "required": ["files"],
                   "properties": {"files": {"type": "array", "minItems": 1}}}}));
    let none = BTreeMap::new();
    assert!(
        evaluate(
            &c,
            &artifacts(&[("report", json!({"files": ["a"]}))]),
            &none
        )
        .passed
    );
    let bad = evaluate(&c, &artifacts(&[("report", json!({"files": []}))]), &none);
    assert!(!bad.passed);
    assert!(bad.failures[0].contains("/files"), "{:?}", bad.failures);
    assert!(!evaluate(&c, &artifacts(&[]), &none).passed);
}

#[test]
fn command_checks_compare_the_exit_code() {
    let c = check(
        json!({"type": "command", "tool": "run", "args": {"cmd": "make test"}, "exit_code": 0}),
    );
    let a = artifacts(&[]);
    let with = |r: ExternalResult| evaluate(&c, &a, &BTreeMap::from([(0, r)]));
    assert!(
        with(ExternalResult::Command(
            json!({"exit_code": 0, "stdout": "ok"})
        ))
        .passed
    );
    assert_eq!(
        with(ExternalResult::Command(json!({"exit_code": 2}))).failures,
        vec!["run exited with 2, expected 0"]
    );
    assert_eq!(
        with(ExternalResult::Command(
            json!({"exit_code": 1, "stdout": "ran 3", "stderr": "FAIL test_start"})
        ))
        .failures,
        vec!["run exited with 1, expected 0: FAIL test_start"],
        "a repair is shown what the command printed"
    );
    assert!(!with(ExternalResult::Command(json!({"stdout": "?"}))).passed);
    assert!(!with(ExternalResult::Unavailable("timeout".into())).passed);
    assert!(!evaluate(&c, &a, &BTreeMap::new()).passed);
}

#[test]
fn verifier_verdicts_are_weaker_evidence() {
    let c = check(json!({"type": "all", "checks": [
        {"type": "artifact", "name": "summary"},
        {"type": "verifier", "prompt": "Is the summary faithful?"}
    ]}));
    assert_eq!(c.leaves().len(), 2);
    assert!(c.leaves()[1].is_external() && !c.leaves()[0].is_external());
    let a = artifacts(&[("summary", json!("text"))]);
    let pass = evaluate(
        &c,
        &a,
        &BTreeMap::from([(
            1,
            ExternalResult::Verdict(json!({"verdict": "pass", "reason": "fine"})),
        )]),
    );
    assert!(pass.passed);
    assert_eq!(pass.evidence, Evidence::Verifier);
    let fail = evaluate(
        &c,
        &a,
        &BTreeMap::from([(
            1,
            ExternalResult::Verdict(json!({"verdict": "fail", "reason": "invents a file"})),
        )]),
    );
    assert_eq!(fail.failures, vec!["verifier said fail: invents a file"]);
    let garbled = evaluate(
        &c,
        &a,
        &BTreeMap::from([(1, ExternalResult::Verdict(json!({"ok": true})))]),
    );
    assert!(!garbled.passed);
}

#[test]
fn all_needs_every_leaf() {
    let c = check(json!({"type": "all", "checks": [
        {"type": "artifact", "name": "a"},
        {"type": "all", "checks": [{"type": "artifact", "name": "b"}]}
    ]}));
    assert!(!evaluate(&c, &artifacts(&[("a", json!(1))]), &BTreeMap::new()).passed);
    assert!(
        evaluate(
            &c,
            &artifacts(&[("a", json!(1)), ("b", json!(2))]),
            &BTreeMap::new()
        )
        .passed
    );
}

#[test]
fn problems_are_reported_for_the_planner() {
    assert!(
        check(json!({"type": "artifact", "name": "x"}))
            .problems()
            .is_empty()
    );
    assert_eq!(
        check(json!({"type": "artifact", "name": " "}))
            .problems()
            .len(),
        1
    );
    assert_eq!(
        check(json!({"type": "all", "checks": []})).problems().len(),
        1
    );
    assert_eq!(
        check(json!({"type": "verifier", "prompt": ""}))
            .problems()
            .len(),
        1
    );
    let bad_schema = check(json!({"type": "schema", "artifact": "r", "schema": {"type": 12}}));
    assert!(bad_schema.problems()[0].contains("invalid JSON Schema"));
    let bad_args = check(json!({"type": "command", "tool": "run", "args": [1]}));
    assert_eq!(
        bad_args.problems(),
        vec!["command check \"args\" must be an object"]
    );
    let mut deep = check(json!({"type": "artifact", "name": "x"}));
    for _ in 0..MAX_CHECK_DEPTH {
        deep = Check::All { checks: vec![deep] };
    }
    assert!(deep.problems()[0].contains("nest deeper"));
    let nested = check(json!({"type": "all", "checks": [
        {"type": "command", "tool": "run"}, {"type": "command", "tool": "sh"}]}));
    assert_eq!(nested.command_tools(), vec!["run", "sh"]);
}

#[test]
fn an_unmet_requirement_makes_the_verdict_a_fail_and_never_the_reverse() {
    let listed = serde_json::json!({
        "requirements": [
            {"need": "note to Priya", "met": true, "evidence": "write_note delivered"},
            {"need": "note to Tomasz", "met": false, "evidence": "none"}],
        "verdict": "pass", "reason": "both notes sent"});
    let (ok, reason) = parse_verdict(&listed).expect("a verdict");
    assert!(!ok);
    assert!(reason.contains("Tomasz"), "{reason}");
    let all_met = serde_json::json!({
        "requirements": [{"need": "note to Priya", "met": true, "evidence": "delivered"}],
        "verdict": "fail", "reason": "no"});
    assert!(!parse_verdict(&all_met).expect("a verdict").0);
    let plain = serde_json::json!({"verdict": "pass", "reason": "ok"});
    assert!(parse_verdict(&plain).expect("a verdict").0);
}

#[test]
fn tidy_keeps_each_required_name_once_and_leaves_data_alone() {
    // What the 1.5B planner wrote (live run, `simple-weather`): refused three times before.
    let mut written = check(json!({"type": "all", "checks": [
        {"type": "schema", "artifact": "weather", "schema": {
            "type": "object",
            "required": ["status", "body", "headers", "url", "status_code", "headers", "body", "url"],
            "properties": {
                "body": {"type": "object", "required": ["temp", "temp"]},
                "mode": {"enum": ["a", "a"], "default": {"required": ["x", "x"]}}
            }
        }},
        {"type": "artifact", "name": "weather"}
    ]}));
    assert!(written.problems()[0].contains("invalid JSON Schema"));
    assert_eq!(written.tidy(), 4);
    assert!(written.problems().is_empty(), "{:?}", written.problems());
    let Check::All { checks } = &written else {
        panic!("still an all")
    };
    let Check::Schema { schema, .. } = &checks[0] else {
        panic!("still a schema leaf")
    };
    assert_eq!(
        schema["required"],
        json!(["status", "body", "headers", "url", "status_code"])
    );
    assert_eq!(schema["properties"]["body"]["required"], json!(["temp"]));
    assert_eq!(
        schema["properties"]["mode"],
        json!({"enum": ["a", "a"], "default": {"required": ["x", "x"]}}),
        "data is not schema"
    );
    assert_eq!(written.tidy(), 0, "a tidy check stays as it is");
}
