use super::*;

fn ask(price: Option<TokenPrice>) -> ModelAsk {
    ModelAsk {
        prompt: 1_000,
        wanted: 1_024,
        least: 256,
        price,
        scale_ppm: 1_000_000,
    }
}

fn room(tokens: u64, cost: Option<u64>) -> PerUnit<Option<u64>> {
    PerUnit {
        tokens: Some(tokens),
        tool_calls: Some(10),
        wall_ms: Some(60_000),
        cost,
    }
}

const PRICE: TokenPrice = TokenPrice {
    input: 1_000_000,
    output: 4_000_000,
};

#[test]
fn a_call_that_fits_is_sent_whole_with_its_re_ask() {
    let sized = Sized {
        max_tokens: 1_024,
        retry_max_tokens: 2_048,
    };
    // Worst case: two prompts and both answers.
    assert_eq!(ask(None).worst(sized).tokens, 2_000 + 1_024 + 2_048);
    assert_eq!(
        reserve_model(&ask(None), &room(5_072, None)),
        Reservation::Whole(sized)
    );
}

#[test]
fn a_call_that_does_not_fit_loses_its_re_ask_then_shrinks_to_the_largest_budget_that_fits() {
    assert_eq!(
        reserve_model(&ask(None), &room(5_071, None)),
        Reservation::Cut(Sized {
            max_tokens: 1_024,
            retry_max_tokens: 0
        })
    );
    let Reservation::Cut(sized) = reserve_model(&ask(None), &room(1_700, None)) else {
        panic!("cut expected");
    };
    assert_eq!(sized.retry_max_tokens, 0);
    assert_eq!(
        sized.max_tokens, 700,
        "1,000 prompt + 700 answer = the room"
    );
}

#[test]
fn a_call_whose_least_budget_does_not_fit_is_refused_on_that_unit() {
    assert_eq!(
        reserve_model(&ask(None), &room(1_255, None)),
        Reservation::Refused(Unit::Tokens)
    );
    // Money: 1,000 prompt tokens at 1 per token and 256 answer tokens at 4 cost 2,024.
    let priced = ask(Some(PRICE));
    assert_eq!(
        reserve_model(&priced, &room(100_000, Some(2_023))),
        Reservation::Refused(Unit::Cost)
    );
    let Reservation::Cut(sized) = reserve_model(&priced, &room(100_000, Some(3_000))) else {
        panic!("cut expected");
    };
    assert_eq!(sized.max_tokens, 500, "1,000 + 4 x 500 = 3,000");
    assert!(priced.worst(sized).cost <= 3_000);
}

#[test]
fn a_money_cap_is_never_spent_on_a_call_nobody_priced() {
    assert_eq!(
        reserve_model(&ask(None), &room(100_000, Some(1_000_000))),
        Reservation::Refused(Unit::Cost)
    );
    // Without a money cap an unpriced model is counted at nothing and sent.
    assert!(matches!(
        reserve_model(&ask(None), &room(100_000, None)),
        Reservation::Whole(_)
    ));
    assert_eq!(reserve_tool(None, &room(10, Some(5))), Err(Unit::Cost));
    assert_eq!(reserve_tool(None, &room(10, None)), Ok(()));
}

#[test]
fn a_tool_call_reserves_one_call_and_its_price() {
    assert_eq!(reserve_tool(Some(5), &room(0, Some(5))), Ok(()));
    assert_eq!(reserve_tool(Some(6), &room(0, Some(5))), Err(Unit::Cost));
    let mut none_left = room(0, None);
    none_left.tool_calls = Some(0);
    assert_eq!(reserve_tool(Some(1), &none_left), Err(Unit::ToolCalls));
}

#[test]
fn a_provider_that_reported_more_than_it_was_asked_scales_every_later_reservation() {
    let seen = Overreport::default();
    assert_eq!(seen.ppm(), 1_000_000);
    seen.learn(900, 1_000);
    seen.learn(500, 0);
    assert_eq!(
        seen.ppm(),
        1_000_000,
        "within what was asked, or unknown: nothing learned"
    );
    seen.learn(2_048, 1_024);
    seen.learn(1_500, 1_024);
    assert_eq!(seen.ppm(), 2_000_000, "the largest ratio seen");
    let doubled = ModelAsk {
        scale_ppm: seen.ppm(),
        ..ask(None)
    };
    let single = Sized {
        max_tokens: 1_024,
        retry_max_tokens: 0,
    };
    assert_eq!(
        doubled.worst(single).tokens,
        1_000 + 2 * 1_024,
        "the answer doubled"
    );
    let Reservation::Cut(sized) = reserve_model(&doubled, &room(2_400, None)) else {
        panic!("cut expected");
    };
    assert_eq!(sized.max_tokens, 700, "1,000 + 2 x 700 = the room");
}

#[test]
fn prompt_tokens_reported_beyond_a_prompts_bound_are_added_to_later_prompts() {
    let seen = Overreport::default();
    seen.learn_prompt(900, 1_000);
    assert_eq!(seen.prompt_excess(), 0);
    seen.learn_prompt(42_000, 4_000);
    seen.learn_prompt(9_000, 4_000);
    assert_eq!(seen.prompt_excess(), 38_000, "the largest excess seen");
}
