//! The submit rules: goal, budget and metadata checks and the idempotency hash's canonical form.

use super::*;

fn request(goal: &str) -> CreateTaskRequest {
    CreateTaskRequest {
        tools: None,
        approval: None,
        goal: goal.into(),
        budget: Some(BudgetRequest::from(Budget {
            tokens: 1000,
            tool_calls: 10,
            wall_ms: 60_000,
            cost: None,
        })),
        strategy: None,
        metadata: None,
    }
}

#[test]
fn blank_long_or_nul_goals_are_refused() {
    assert!(request("find the bug").validate().is_ok());
    for goal in [
        "",
        "   \n\t",
        "a\0b",
        "\u{200B}\u{200B}",
        " \u{FEFF}\u{2060} ",
    ] {
        assert!(request(goal).validate().is_err(), "{goal:?}");
    }
    assert!(request(&"x".repeat(MAX_GOAL_CHARS + 1)).validate().is_err());
    assert!(request(&"x".repeat(MAX_GOAL_CHARS)).validate().is_ok());
    // Characters, not bytes: 8,192 four-byte characters are accepted.
    assert!(
        request(&"\u{1F600}".repeat(MAX_GOAL_CHARS))
            .validate()
            .is_ok()
    );
}

#[test]
fn every_problem_is_listed() {
    let mut bad = request("");
    bad.budget = Some(BudgetRequest {
        tokens: Some(0),
        ..BudgetRequest::default()
    });
    bad.metadata = Some(json!([1, 2]));
    let Err(ApiError::Validation { errors, .. }) = bad.validate() else {
        panic!("expected a validation error");
    };
    assert_eq!(errors.len(), 3, "{errors:?}");
}

#[test]
fn metadata_must_be_a_small_object_without_nul() {
    let mut ok = request("g");
    ok.metadata = Some(json!({"team": "search"}));
    assert!(ok.validate().is_ok());
    for metadata in [
        json!("text"),
        json!({"k": "x".repeat(MAX_METADATA_BYTES)}),
        json!({"k": ["a\u{0}"]}),
    ] {
        let mut bad = request("g");
        bad.metadata = Some(metadata);
        assert!(bad.validate().is_err());
    }
}

#[test]
fn omitted_defaults_hash_like_explicit_ones() {
    let implicit = request("g");
    let mut explicit = request("g");
    explicit.strategy = Some(Strategy::Auto);
    explicit.metadata = Some(json!({}));
    assert_eq!(
        idempotency::canonical_hash(&implicit.canonical(Budget::DEFAULT)),
        idempotency::canonical_hash(&explicit.canonical(Budget::DEFAULT))
    );
    explicit.strategy = Some(Strategy::Direct);
    assert_ne!(
        idempotency::canonical_hash(&implicit.canonical(Budget::DEFAULT)),
        idempotency::canonical_hash(&explicit.canonical(Budget::DEFAULT))
    );
}

#[test]
fn an_omitted_budget_or_unit_is_the_default_one() {
    let mut omitted = request("g");
    omitted.budget = None;
    assert!(omitted.validate().is_ok());
    assert_eq!(omitted.budget_over(Budget::DEFAULT), Budget::DEFAULT);
    let mut partial = request("g");
    partial.budget = Some(BudgetRequest {
        tokens: Some(5_000),
        ..BudgetRequest::default()
    });
    assert_eq!(
        partial.budget_over(Budget::DEFAULT),
        Budget {
            tokens: 5_000,
            ..Budget::DEFAULT
        }
    );
    // Omitted and the default spelled out are the same request.
    let mut explicit = request("g");
    explicit.budget = Some(BudgetRequest::from(Budget::DEFAULT));
    assert_eq!(
        idempotency::canonical_hash(&omitted.canonical(omitted.budget_over(Budget::DEFAULT))),
        idempotency::canonical_hash(&explicit.canonical(explicit.budget_over(Budget::DEFAULT)))
    );
}
