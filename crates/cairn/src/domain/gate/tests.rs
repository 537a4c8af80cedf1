use super::*;

fn features(est: u32, writes: bool, targets: u32) -> GateFeatures {
    GateFeatures {
        est_tool_calls: est,
        touches_writes: writes,
        targets,
        goal_kind: "lookup".into(),
        direct_history: None,
        source: FeatureSource::Model,
    }
}

#[test]
fn parses_the_gate_model_output() {
    let f: GateFeatures = serde_json::from_str(
        r#"{"est_tool_calls": 1, "touches_writes": false, "targets": 1, "goal_kind": "lookup"}"#,
    )
    .unwrap();
    assert_eq!(f, features(1, false, 1));
}

#[test]
fn side_effects_and_several_targets_plan() {
    let t = GateThresholds::default();
    let d = route(features(1, true, 1), &t);
    assert_eq!(
        (d.route, d.reasons),
        (Route::Plan, vec![GateReason::TouchesWrites])
    );
    let d = route(features(1, false, 3), &t);
    assert_eq!(
        (d.route, d.reasons),
        (
            Route::Plan,
            vec![GateReason::MultipleTargets { targets: 3 }]
        )
    );
    assert_eq!(route(features(9, true, 2), &t).reasons.len(), 2);
}

fn with_history(successes: u64, total: u64) -> GateFeatures {
    GateFeatures {
        direct_history: Some(DirectHistory { successes, total }),
        ..features(1, false, 1)
    }
}

#[test]
fn unknown_history_is_not_a_good_record() {
    let t = GateThresholds::default();
    let d = route(features(3, false, 1), &t);
    assert_eq!(d.route, Route::Plan, "no direct history: plan");
    assert_eq!(
        d.reasons,
        vec![
            GateReason::FewToolCalls {
                estimated: 3,
                max: 3
            },
            GateReason::DirectUnreliable {
                success_rate: 0.5,
                min: 0.9,
                from_history: false
            },
        ]
    );
    assert_eq!(route(three(0, 0), &t).route, Route::Plan);
    assert_eq!(direct_estimate(None, &t), (0.5, false));
}

/// A goal of three estimated calls, read-only, with its kind's record.
fn three(successes: u64, total: u64) -> GateFeatures {
    GateFeatures {
        est_tool_calls: 3,
        ..with_history(successes, total)
    }
}

#[test]
fn a_read_of_few_calls_goes_direct_until_its_record_says_otherwise() {
    assert_eq!(
        GateThresholds::default().cold_start_tool_calls,
        0,
        "off by default"
    );
    let t = GateThresholds {
        cold_start_tool_calls: 1,
        ..GateThresholds::default()
    };
    let cold = route(features(1, false, 1), &t);
    assert_eq!(cold.route, Route::Direct, "one call, no record");
    assert_eq!(
        cold.reasons,
        vec![GateReason::ColdStart {
            estimated: 1,
            max: 1
        }]
    );
    // Two calls need a record by default; an operator may widen the rule.
    assert_eq!(route(features(2, false, 1), &t).route, Route::Plan);
    let wider = GateThresholds {
        cold_start_tool_calls: 2,
        ..t
    };
    assert_eq!(route(features(2, false, 1), &wider).route, Route::Direct);
    assert_eq!(route(with_history(0, 0), &t).route, Route::Direct);
    // Its own record alone: one success is a good one, one failure in two is not.
    assert_eq!(route(with_history(1, 1), &t).route, Route::Direct);
    let failed = route(with_history(1, 2), &t);
    assert_eq!(failed.route, Route::Plan);
    assert_eq!(
        failed.reasons[1],
        GateReason::DirectUnreliable {
            success_rate: 0.5,
            min: 0.9,
            from_history: true
        }
    );
    // Writes and several targets are planned whatever the estimate.
    assert_eq!(route(features(1, true, 1), &t).route, Route::Plan);
    assert_eq!(route(features(2, false, 2), &t).route, Route::Plan);
    let never = GateThresholds {
        cold_start_tool_calls: 0,
        ..t
    };
    assert_eq!(route(features(1, false, 1), &never).route, Route::Plan);
}

#[test]
fn a_simple_read_with_a_good_record_goes_direct() {
    let t = GateThresholds::default();
    // (8 + 0.5 * 2) / (8 + 2) = 0.9: eight direct successes in a row earn the direct route.
    let d = route(three(8, 8), &t);
    assert_eq!(d.route, Route::Direct);
    assert!(matches!(
        d.reasons[1],
        GateReason::DirectReliable {
            from_history: true,
            ..
        }
    ));
    assert_eq!(route(three(7, 7), &t).route, Route::Plan);
    let four_calls = GateFeatures {
        est_tool_calls: 4,
        ..with_history(100, 100)
    };
    assert_eq!(route(four_calls, &t).route, Route::Plan);
}

#[test]
fn history_outweighs_the_prior_as_it_grows() {
    let t = GateThresholds::default();
    assert_eq!(route(three(9, 10), &t).route, Route::Plan, "10/12");
    assert_eq!(route(three(95, 100), &t).route, Route::Direct);
    assert_eq!(route(three(80, 100), &t).route, Route::Plan);
    assert!(matches!(
        route(three(5, 10), &t).reasons[1],
        GateReason::DirectUnreliable {
            from_history: true,
            ..
        }
    ));
    // An operator may trust a kind up front; with no weight the prior alone decides.
    let trusting = GateThresholds {
        prior_direct_success: 0.95,
        prior_weight: 0.0,
        ..t
    };
    assert_eq!(route(three(0, 0), &trusting).route, Route::Direct);
    assert_eq!(route(three(1, 10), &trusting).route, Route::Plan);
    // More successes than outcomes cannot push the estimate past 1.
    assert!(
        direct_estimate(
            Some(DirectHistory {
                successes: 9,
                total: 1
            }),
            &t
        )
        .0 <= 1.0
    );
}

#[test]
fn combining_sources_biases_to_plan() {
    let model = features(1, false, 1);
    let heuristic = GateFeatures {
        source: FeatureSource::Heuristic,
        ..features(2, true, 1)
    };
    let both = model.biased_with(&heuristic);
    assert!(both.touches_writes);
    assert_eq!(
        (both.est_tool_calls, both.source),
        (2, FeatureSource::Combined)
    );
    assert_eq!(route(both, &GateThresholds::default()).route, Route::Plan);
}

#[test]
fn either_source_flagging_writes_or_targets_plans() {
    let direct = |f: GateFeatures| GateFeatures {
        direct_history: Some(DirectHistory {
            successes: 100,
            total: 100,
        }),
        ..f
    };
    let quiet = features(1, false, 1);
    let writes = features(1, true, 1);
    let several = features(1, false, 4);
    let t = GateThresholds::default();
    assert_eq!(
        route(direct(combine(Some(&quiet), &quiet)), &t).route,
        Route::Direct
    );
    for (model, heuristic) in [
        (&quiet, &writes),
        (&writes, &quiet),
        (&quiet, &several),
        (&several, &quiet),
    ] {
        let both = combine(Some(model), heuristic);
        assert_eq!(both.source, FeatureSource::Combined);
        assert_eq!(
            route(direct(both), &t).route,
            Route::Plan,
            "{model:?} + {heuristic:?}"
        );
    }
    // No model answer: the heuristic alone.
    assert_eq!(combine(None, &writes), writes);
}

#[test]
fn a_record_keeps_every_source() {
    let model = features(1, false, 1);
    let heuristic = GateFeatures {
        source: FeatureSource::Heuristic,
        ..features(2, true, 1)
    };
    let combined = combine(Some(&model), &heuristic);
    let decision = route(combined.clone(), &GateThresholds::default());
    let record = GateRecord::decided(
        decision,
        crate::domain::task::Strategy::Auto,
        GateSources {
            model: Some(model.clone()),
            heuristic: heuristic.clone(),
        },
    );
    assert_eq!(record.route, Route::Plan);
    assert_eq!(record.features, Some(combined));
    assert_eq!(record.model, Some(model));
    assert_eq!(record.heuristic, Some(heuristic.clone()));
    let json = serde_json::to_value(&record).unwrap();
    assert_eq!(json["heuristic"]["touches_writes"], true);
    assert_eq!(json["model"]["touches_writes"], false);
    assert_eq!(json["features"]["source"], "combined");
    let forced = GateRecord::forced(
        Route::Direct,
        crate::domain::task::Strategy::Direct,
        Some(heuristic),
    );
    assert_eq!(forced.source.as_deref(), Some("strategy"));
    assert_eq!(
        forced.features.as_ref().map(|f| f.goal_kind.as_str()),
        Some("lookup")
    );
}

#[test]
fn a_goal_with_no_tool_call_goes_direct_without_history_but_writes_still_plan() {
    let t = GateThresholds::default();
    let d = route(features(0, false, 1), &t);
    assert_eq!(
        (d.route, d.reasons),
        (Route::Direct, vec![GateReason::NothingToPlan])
    );
    // A write, or several targets, plans even when no tool call is expected.
    assert_eq!(route(features(0, true, 1), &t).route, Route::Plan);
    assert_eq!(route(features(0, false, 2), &t).route, Route::Plan);
    // One expected call with no history is not enough for the direct route (unless an
    // operator turns the cold-start rule on).
    assert_eq!(route(features(1, false, 1), &t).route, Route::Plan);
}

#[test]
fn a_question_about_the_world_now_needs_a_read_and_one_from_knowledge_does_not() {
    let now = heuristic_features("What is the temperature in Oslo right now?", &[]);
    assert_eq!(now.est_tool_calls, 1, "{now:?}");
    assert!(!now.touches_writes);
    let current = heuristic_features("Which is the current version of the api?", &[]);
    assert_eq!(current.est_tool_calls, 1, "{current:?}");
    let known = heuristic_features("What is the capital of Australia?", &[]);
    assert_eq!(known.est_tool_calls, 0, "{known:?}");
}
