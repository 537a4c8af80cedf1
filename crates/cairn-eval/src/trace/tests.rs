//! The slip fit over judged calls.

use super::*;

fn judged(unwritten: usize, chars: usize, first: Verdict) -> Judged {
    Judged {
        task: "t".into(),
        repeat: 0,
        purpose: "tactical".into(),
        milestone: Some("reactive".into()),
        chars,
        pending: unwritten.max(1),
        unwritten,
        first,
        covered: None,
        steps: Vec::new(),
    }
}

#[test]
fn the_fit_recovers_a_stop_rate_that_grows_with_unwritten_steps() {
    // Stops in 1 of 4 calls at unwritten 1, 2 of 4 at 2, 3 of 4 at 3: slope 0.25 through
    // the origin, whatever the input length.
    let mut calls = Vec::new();
    for (u, stops) in [(1, 1), (2, 2), (3, 3)] {
        for i in 0..4 {
            let first = if i < stops {
                Verdict::Stop
            } else {
                Verdict::Next
            };
            calls.push(judged(u, 1000 + 500 * (i % 2), first));
        }
    }
    calls.push(judged(2, 2000, Verdict::Later));
    let c = calibrate(&calls);
    assert_eq!(c.calls, 13);
    assert_eq!(c.kinds[0].stop, 6);
    assert_eq!(c.kinds[0].later, 1);
    assert!(
        (c.fitted.stop_per_unwritten - 0.25).abs() < 0.03,
        "{:?}",
        c.fitted
    );
    assert!(c.fitted.stop_base < 0.05, "{:?}", c.fitted);
    assert!(c.fitted.misorder_per_unwritten > 0.0);
    assert!(c.markdown().contains("tactical/reactive"));
}

#[test]
fn too_few_traces_fit_nothing_rather_than_nonsense() {
    let c = calibrate(&[judged(1, 100, Verdict::Next)]);
    assert_eq!(c.fitted, SlipRates::default());
}
