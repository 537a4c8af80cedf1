//! Traces of a live evaluation, for calibrating the world's slip rates (rule 8): every real
//! model answer judged against the ground truth ([`World::judge`]), written as `trace.jsonl`,
//! and `slips.md`/`slips.json`, the counts per call kind and the least-squares fit of the
//! stop-early form `stop_base + stop_per_unwritten * unwritten + stop_per_kchar * kchars` and
//! of `misorder_per_unwritten * unwritten` (docs/evaluation.md, "Calibrating the slips").

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use serde::Serialize;

use super::calls::CallLog;
use super::invent_fit::{InventFit, chooses, fit_invent, fit_invent_by_answer, rule9_rates};
use super::list_fit::{ListFit, fit_lists};
use super::lsq::nonnegative;
use super::slip_rates::Answer;
use super::suite::SlipRates;
use super::world::{Judged, Verdict, World};
use cairn::engine::runtime::ports::{ModelCall, ModelPort, ModelReply, PortError};

/// A model port that judges every answer of the model it wraps, and appends each judged call
/// to its log (`trace.jsonl`) as it happens, so a killed evaluation keeps its traces.
pub struct Tracing {
    inner: Arc<dyn ModelPort>,
    world: Arc<World>,
    judged: Mutex<Vec<Judged>>,
    log: Option<Mutex<std::fs::File>>,
    /// Every call stored whole (`calls.jsonl`), beside the verdicts.
    calls: Option<CallLog>,
}

impl Tracing {
    pub fn new(inner: Arc<dyn ModelPort>, world: Arc<World>) -> Tracing {
        Tracing {
            inner,
            world,
            judged: Mutex::new(Vec::new()),
            log: None,
            calls: None,
        }
    }

    /// Appends every judged call to `out/trace.jsonl` and stores every call whole in
    /// `out/calls.jsonl` ([`crate::calls`]): kept when `resume`, else started anew.
    pub fn logged(mut self, out: &Path, resume: bool) -> std::io::Result<Tracing> {
        self.calls = Some(CallLog::open(out, resume).map_err(std::io::Error::other)?);
        let path = out.join("trace.jsonl");
        if !resume {
            std::fs::write(&path, b"")?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        self.log = Some(Mutex::new(file));
        Ok(self)
    }

    fn append(&self, judged: &Judged) {
        let Some(log) = &self.log else { return };
        let Ok(mut line) = serde_json::to_vec(judged) else {
            return;
        };
        line.push(b'\n');
        let mut file = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(error) = file.write_all(&line) {
            tracing::warn!(%error, "cannot append to trace.jsonl");
        }
    }

    pub fn judged(&self) -> Vec<Judged> {
        self.judged
            .lock()
            .map(|j| j.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }
}

#[async_trait]
impl ModelPort for Tracing {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        let started = Instant::now();
        let reply = self.inner.complete(call.clone()).await;
        let latency = started.elapsed();
        self.world.count_model_call(&call).await;
        let judged = match &reply {
            Ok(answer) => self.world.judge(&call, &answer.value).await,
            Err(_) => None,
        };
        if let Some(calls) = &self.calls {
            let world = &self.world;
            calls
                .record(world, &call, &reply, latency, judged.as_ref())
                .await;
        }
        if let Some(judged) = judged {
            self.append(&judged);
            match self.judged.lock() {
                Ok(mut all) => all.push(judged),
                Err(poisoned) => poisoned.into_inner().push(judged),
            }
        }
        reply
    }
}

/// What the traces say, per kind of call that chooses what to do next.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SlipCounts {
    /// `purpose/milestone`, e.g. `tactical/reactive`, `tactical/direct`, `strategic/v1`.
    pub kind: String,
    /// Calls made with steps pending.
    pub calls: u32,
    pub next: u32,
    pub stop: u32,
    pub later: u32,
    pub wrong_args: u32,
    pub repeat: u32,
    pub other: u32,
    pub mean_unwritten: f64,
    pub mean_kchars: f64,
}

/// The calibration: counts per kind and the fitted rates over every call with steps pending.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Calibration {
    pub calls: usize,
    pub kinds: Vec<SlipCounts>,
    pub fitted: SlipRates,
    /// Rule 9's counts (over every call that chooses what to do, steps pending or not).
    pub invent: InventFit,
    /// The same, over the calls asked for a list of steps and for one move apart.
    pub invent_by_answer: Vec<(Answer, InventFit)>,
    /// Past the first call of a list, and the guesses (`crate::list_fit`).
    pub lists: ListFit,
}

fn kind(j: &Judged) -> String {
    let milestone = match j.milestone.as_deref() {
        Some(m @ ("reactive" | "direct" | "v1" | "one_shot")) => m,
        Some(_) => "milestone",
        None => "-",
    };
    format!("{}/{milestone}", j.purpose)
}

/// Counts and fits the judged calls that had steps pending (the gate and the verifier choose
/// nothing and are left out).
pub fn calibrate(judged: &[Judged]) -> Calibration {
    let acting: Vec<&Judged> = judged
        .iter()
        .filter(|j| j.pending > 0 && j.purpose != "gate" && j.purpose != "verifier")
        .collect();
    // Rule 8 acts on calls that propose steps: not one_shot's answer (it may not act) and not
    // a plan of milestones (its empty plan is counted in `kinds`, as `strategic/-`).
    let proposing: Vec<&Judged> = acting.iter().copied().filter(|j| chooses(j)).collect();
    let mut kinds: Vec<SlipCounts> = Vec::new();
    for j in &acting {
        let name = kind(j);
        let index = match kinds.iter().position(|k| k.kind == name) {
            Some(index) => index,
            None => {
                kinds.push(SlipCounts {
                    kind: name,
                    ..SlipCounts::default()
                });
                kinds.len() - 1
            }
        };
        let k = &mut kinds[index];
        k.calls += 1;
        match j.first {
            Verdict::Next => k.next += 1,
            Verdict::Stop => k.stop += 1,
            Verdict::Later => k.later += 1,
            Verdict::WrongArgs => k.wrong_args += 1,
            Verdict::Repeat => k.repeat += 1,
            Verdict::Other => k.other += 1,
            Verdict::Done => {}
        }
        k.mean_unwritten += j.unwritten as f64;
        k.mean_kchars += j.chars as f64 / 1000.0;
    }
    for k in &mut kinds {
        let n = f64::from(k.calls.max(1));
        k.mean_unwritten /= n;
        k.mean_kchars /= n;
    }
    let invent = fit_invent(judged);
    let by_answer = fit_invent_by_answer(judged);
    let rule9 = rule9_rates(&invent, &by_answer);
    let fitted = SlipRates {
        invent_idle: rule9.invent_idle,
        invent_base: rule9.invent_base,
        invent_repeat: rule9.invent_repeat,
        invent_move_idle: rule9.invent_move_idle,
        invent_move_base: rule9.invent_move_base,
        ..fit(&proposing)
    };
    Calibration {
        calls: acting.len(),
        kinds,
        fitted,
        invent,
        invent_by_answer: by_answer,
        lists: fit_lists(judged),
    }
}

/// Least squares of the stop indicator on (1, unwritten, kchars), every rate at least 0, and of
/// the misorder indicator on unwritten alone (through the origin), each clamped to 0..=1.
fn fit(acting: &[&Judged]) -> SlipRates {
    let rows: Vec<([f64; 3], f64, f64)> = acting
        .iter()
        .map(|j| {
            let x = [1.0, j.unwritten as f64, j.chars as f64 / 1000.0];
            let stop = f64::from(u8::from(j.first == Verdict::Stop));
            let later = f64::from(u8::from(j.first == Verdict::Later));
            (x, stop, later)
        })
        .collect();
    let mut xtx = [[0.0; 3]; 3];
    let mut xty = [0.0; 3];
    for (x, y, _) in &rows {
        for a in 0..3 {
            xty[a] += x[a] * y;
            for b in 0..3 {
                xtx[a][b] += x[a] * x[b];
            }
        }
    }
    let stop = nonnegative(&xtx, &xty);
    let (uu, uy) = rows.iter().fold((0.0, 0.0), |(uu, uy), (x, _, later)| {
        (uu + x[1] * x[1], uy + x[1] * later)
    });
    let clamp = |v: f64| {
        if v.is_finite() {
            v.clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    SlipRates {
        stop_base: clamp(stop[0]),
        stop_per_unwritten: clamp(stop[1]),
        stop_per_kchar: clamp(stop[2]),
        misorder_per_unwritten: clamp(if uu > 0.0 { uy / uu } else { 0.0 }),
        ..SlipRates::default()
    }
}

impl Calibration {
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# Slip calibration from {} live calls with steps pending\n\n| kind | calls | next | \
             stop | later | wrong args | repeat | other | mean unwritten | mean kchars |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
            self.calls
        );
        for k in &self.kinds {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.1} |",
                k.kind,
                k.calls,
                k.next,
                k.stop,
                k.later,
                k.wrong_args,
                k.repeat,
                k.other,
                k.mean_unwritten,
                k.mean_kchars
            );
        }
        let f = &self.fitted;
        let _ = writeln!(
            out,
            "\nFitted `[world.slips]`: stop_base = {:.4}, stop_per_unwritten = {:.4}, \
             stop_per_kchar = {:.4}, misorder_per_unwritten = {:.4}; rule 9, lists and moves \
             apart: invent_idle = {:.4}, invent_base = {:.4}, invent_repeat = {:.4}, \
             invent_move_idle = {:.4}, invent_move_base = {:.4}",
            f.stop_base,
            f.stop_per_unwritten,
            f.stop_per_kchar,
            f.misorder_per_unwritten,
            f.invent_idle,
            f.invent_base,
            f.invent_repeat,
            f.invent_move_idle.unwrap_or(f.invent_idle),
            f.invent_move_base.unwrap_or(f.invent_base)
        );
        let i = &self.invent;
        let _ = writeln!(
            out,
            "\nInvented calls (rule 9): {} of {} fresh calls with nothing pending, {} of {} with \
             steps pending, {} of {} act-loop calls right after an invented one. Pooled over \
             lists and moves: invent_idle = {:.4}, invent_base = {:.4}, invent_repeat = {:.4}",
            i.idle.invented,
            i.idle.calls,
            i.pending.invented,
            i.pending.calls,
            i.after.invented,
            i.after.calls,
            i.invent_idle,
            i.invent_base,
            i.invent_repeat
        );
        out.push_str(
            "\n| answer asked for | nothing pending: invented / calls | steps pending | right \
             after an invented call | invent_idle | invent_base | invent_repeat |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for (answer, f) in &self.invent_by_answer {
            let _ = writeln!(
                out,
                "| {answer:?} | {} / {} | {} / {} | {} / {} | {:.2} | {:.2} | {:.2} |",
                f.idle.invented,
                f.idle.calls,
                f.pending.invented,
                f.pending.calls,
                f.after.invented,
                f.after.calls,
                f.invent_idle,
                f.invent_base,
                f.invent_repeat
            );
        }
        out.push_str(&self.lists.markdown());
        out
    }
}

/// Reads every judged call of `out/trace.jsonl` (those of earlier, resumed invocations too;
/// a line a killed process left unfinished is skipped) and writes `slips.json` and `slips.md`.
pub fn conclude(out: &Path) -> std::io::Result<Calibration> {
    let text = std::fs::read_to_string(out.join("trace.jsonl"))?;
    let judged: Vec<Judged> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    write_slips(out, &judged)
}

fn write_slips(out: &Path, judged: &[Judged]) -> std::io::Result<Calibration> {
    let calibration = calibrate(judged);
    let json = serde_json::to_string_pretty(&calibration).map_err(std::io::Error::other)?;
    std::fs::write(out.join("slips.json"), json)?;
    std::fs::write(out.join("slips.md"), calibration.markdown())?;
    Ok(calibration)
}

#[cfg(test)]
mod tests;
