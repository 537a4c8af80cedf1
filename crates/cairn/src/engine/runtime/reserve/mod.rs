//! Reserving a call's worst case before it is sent, so the books never exceed a budget.
//!
//! The ledger charges what a call cost after it answered; charged alone, one call could
//! overshoot a milestone's allocation and the reserve before the books notice (an answer at its
//! `max_tokens`, then the client's re-ask of a cut-off answer with twice the budget). So before
//! each model call the engine prices its worst case: a prompt counted as one token per byte
//! (`ModelCall::prompt_bound`), the answer at its `max_tokens`, and the re-ask at its own
//! budget, priced where money is a unit. It is checked against what the milestone and the
//! reserve have left (`Ledger::room`), less the worst cases of this task's calls whose spend is
//! not on the books yet ([`Hold`]). What does not fit is cut: first the re-ask is dropped, then
//! the answer's budget shrinks, down to a quarter of the purpose's own; below that the call is
//! refused, not sent, and the task stops `budget_exhausted` with its report. Where the task's
//! tenant has a spend cap, money's room is also at most what the tenant's period has left; a
//! call refused on that is not the task's fault, so the attempt stops instead and the task
//! waits, queued, for the period's end ([`Refusal::Stopped`]). A tool call
//! reserves one call and its price the same way. After the call the ledger is charged what the
//! provider reported; a provider that reports more than a reservation bounds
//! ([`Overreport`]) has every later reservation of the task enlarged by what it added, in this
//! attempt and, through the checkpoint, in every later one.
//!
//! Transient retries are not reserved: a request that failed reported no usage, and the books
//! hold only what providers report. Wall time is reserved by a time limit: a call may take at
//! most what its milestone and the reserve have left of it (with one milestone at a time, what
//! the waiting milestones could lend too), is cut off there, and is charged at most that; with
//! none left it is not sent. Wall time is not held: calls of milestones running side by side
//! each count on the reserve's.

use std::sync::atomic::{AtomicU64, Ordering};

use super::ports::Purpose;
use crate::domain::ledger::{PerUnit, Unit};
use crate::domain::price::{ModelPrices, TokenPrice};

/// The answer budgets a model call is sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sized {
    pub max_tokens: u32,
    /// 0: no re-ask of a cut-off answer.
    pub retry_max_tokens: u32,
}

/// What a reservation allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Sent as asked: the answer's budget and a re-ask at twice it.
    Whole(Sized),
    /// Sent smaller: without the re-ask, or with a smaller answer budget.
    Cut(Sized),
    /// Not sent: its smallest form does not fit this unit.
    Refused(Unit),
}

/// One model call as a reservation sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelAsk {
    /// [`ModelCall::prompt_bound`](super::ports::ModelCall::prompt_bound), plus what the provider
    /// has reported beyond such bounds ([`Overreport::prompt_excess`]).
    pub prompt: u64,
    /// The purpose's own answer budget.
    pub wanted: u32,
    /// The smallest answer budget worth sending.
    pub least: u32,
    /// `None`: nobody priced the model.
    pub price: Option<TokenPrice>,
    /// How many more answer tokens than it was asked for the provider has reported, in parts
    /// per million ([`Overreport`]): the worst case's answers are scaled by it.
    pub scale_ppm: u64,
}

impl ModelAsk {
    /// The most `sized` can be charged, per unit (tokens and money).
    pub fn worst(&self, sized: Sized) -> PerUnit<u64> {
        let asks = 1 + u64::from(sized.retry_max_tokens > 0);
        let input = self.prompt.saturating_mul(asks);
        let asked = u64::from(sized.max_tokens) + u64::from(sized.retry_max_tokens);
        let output = scale(asked, self.scale_ppm);
        PerUnit {
            tokens: input.saturating_add(output),
            cost: self.price.map_or(0, |price| price.of(input, output)),
            ..PerUnit::default()
        }
    }

    /// The first capped unit `sized` does not fit.
    fn misfit(&self, sized: Sized, room: &PerUnit<Option<u64>>) -> Option<Unit> {
        if room.cost.is_some() && self.price.is_none() {
            // A money cap is never spent on a call nobody priced.
            return Some(Unit::Cost);
        }
        overflows(self.worst(sized), room)
    }
}

/// `ceil(n * ppm / 1,000,000)`, never below `n`.
fn scale(n: u64, ppm: u64) -> u64 {
    let ppm = u128::from(ppm.max(ONE));
    u64::try_from((u128::from(n) * ppm).div_ceil(u128::from(ONE))).unwrap_or(u64::MAX)
}

const ONE: u64 = 1_000_000;

/// The most a provider has reported beyond what it was asked for, in this task: the ratio of
/// reported answer tokens to the `max_tokens` asked, in parts per million (`ONE` when it never
/// has). A provider that counts more than it was asked to write is believed, and every later
/// reservation is scaled by it, so its over-count is booked within the budget too.
#[derive(Debug, Default)]
pub struct Overreport {
    ratio: AtomicU64,
    prompt_excess: AtomicU64,
}

impl Overreport {
    pub fn ppm(&self) -> u64 {
        self.ratio.load(Ordering::SeqCst).max(ONE)
    }

    /// The most prompt tokens a provider has reported beyond a prompt's bound (a system prompt
    /// of its own, a simulator's scripted figures): added to every later prompt's bound.
    pub fn prompt_excess(&self) -> u64 {
        self.prompt_excess.load(Ordering::SeqCst)
    }

    /// Learns from one answer: `reported` answer tokens against the `asked` (0: unknown,
    /// nothing learned).
    pub fn learn(&self, reported: u64, asked: u64) {
        if asked == 0 || reported <= asked {
            return;
        }
        let ratio = (u128::from(reported) * u128::from(ONE)).div_ceil(u128::from(asked));
        self.learn_ratio(u64::try_from(ratio).unwrap_or(u64::MAX));
    }

    fn learn_ratio(&self, ppm: u64) {
        self.ratio.fetch_max(ppm, Ordering::SeqCst);
    }

    /// Learns from one answer's prompt tokens against the bound of the prompts sent.
    pub fn learn_prompt(&self, reported: u64, bound: u64) {
        if reported > bound {
            self.prompt_excess
                .fetch_max(reported - bound, Ordering::SeqCst);
        }
    }
}

/// The first unit in which `worst` exceeds a capped `room`.
fn overflows(worst: PerUnit<u64>, room: &PerUnit<Option<u64>>) -> Option<Unit> {
    Unit::ALL
        .into_iter()
        .find(|unit| room.get(*unit).is_some_and(|left| *worst.get(*unit) > left))
}

/// Sizes a model call to `room`: whole, cut (no re-ask, then the largest answer budget from
/// `least` up that fits), or refused.
pub fn reserve_model(ask: &ModelAsk, room: &PerUnit<Option<u64>>) -> Reservation {
    if room.wall_ms == Some(0) {
        return Reservation::Refused(Unit::WallMs);
    }
    let whole = Sized {
        max_tokens: ask.wanted,
        retry_max_tokens: ask.wanted.saturating_mul(2),
    };
    if ask.misfit(whole, room).is_none() {
        return Reservation::Whole(whole);
    }
    let single = |max_tokens| Sized {
        max_tokens,
        retry_max_tokens: 0,
    };
    if ask.misfit(single(ask.wanted), room).is_none() {
        return Reservation::Cut(single(ask.wanted));
    }
    if let Some(unit) = ask.misfit(single(ask.least), room) {
        return Reservation::Refused(unit);
    }
    // `lo` fits, `hi` does not: the largest fitting budget is found in log2(wanted) checks.
    let (mut lo, mut hi) = (ask.least, ask.wanted);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match ask.misfit(single(mid), room) {
            None => lo = mid,
            Some(_) => hi = mid,
        }
    }
    Reservation::Cut(single(lo))
}

/// A tool call's reservation: one call and its price; `Err` names the unit it does not fit.
pub fn reserve_tool(price: Option<u64>, room: &PerUnit<Option<u64>>) -> Result<(), Unit> {
    if room.wall_ms == Some(0) {
        return Err(Unit::WallMs);
    }
    if room.cost.is_some() && price.is_none() {
        return Err(Unit::Cost);
    }
    let worst = PerUnit {
        tool_calls: 1,
        cost: price.unwrap_or(0),
        ..PerUnit::default()
    };
    overflows(worst, room).map_or(Ok(()), Err)
}

/// The price of the model a purpose is sent to.
pub fn model_price(prices: &ModelPrices, purpose: Purpose) -> Option<TokenPrice> {
    match purpose {
        Purpose::Gate => prices.gate,
        Purpose::Strategic => prices.strategic,
        Purpose::Tactical => prices.tactical,
        Purpose::Verifier => prices.verifier,
    }
}

mod books;
mod settle;
mod tenant;
pub use books::{Hold, HoldBook, Holds, Limited, Refusal};
pub use settle::{Sent, wall_ms, within};

#[cfg(test)]
mod tests;
