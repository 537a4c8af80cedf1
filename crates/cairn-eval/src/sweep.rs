//! Sensitivity: one world parameter swept over several values (`cairn eval --sweep
//! guess_success=0.3,0.5,0.7`), the whole suite run at each, and verified success per strategy
//! charted against the parameter, so a reader sees where each strategy wins instead of one
//! number (docs/evaluation.md, "Sensitivity").

use std::fmt::Write as _;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::report::Report;
use super::suite::WorldSettings;

/// A world parameter that can be swept or overridden.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorldParam {
    GuessSuccess,
    GateNoise,
    Seed,
    TokensPerCall,
    CharsPerToken,
    StopBase,
    StopPerUnwritten,
    StopPerKchar,
    MisorderPerUnwritten,
    InventIdle,
    InventBase,
    InventRepeat,
    InventMoveIdle,
    InventMoveBase,
    InventStated,
    InventDone,
    InventLater,
    PlanToolMiss,
    PlanAcceptMiss,
}

impl WorldParam {
    pub const ALL: [WorldParam; 19] = [
        WorldParam::GuessSuccess,
        WorldParam::GateNoise,
        WorldParam::Seed,
        WorldParam::TokensPerCall,
        WorldParam::CharsPerToken,
        WorldParam::StopBase,
        WorldParam::StopPerUnwritten,
        WorldParam::StopPerKchar,
        WorldParam::MisorderPerUnwritten,
        WorldParam::InventIdle,
        WorldParam::InventBase,
        WorldParam::InventRepeat,
        WorldParam::InventMoveIdle,
        WorldParam::InventMoveBase,
        WorldParam::InventStated,
        WorldParam::InventDone,
        WorldParam::InventLater,
        WorldParam::PlanToolMiss,
        WorldParam::PlanAcceptMiss,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorldParam::GuessSuccess => "guess_success",
            WorldParam::GateNoise => "gate_noise",
            WorldParam::Seed => "seed",
            WorldParam::TokensPerCall => "tokens_per_call",
            WorldParam::CharsPerToken => "chars_per_token",
            WorldParam::StopBase => "stop_base",
            WorldParam::StopPerUnwritten => "stop_per_unwritten",
            WorldParam::StopPerKchar => "stop_per_kchar",
            WorldParam::MisorderPerUnwritten => "misorder_per_unwritten",
            WorldParam::InventIdle => "invent_idle",
            WorldParam::InventBase => "invent_base",
            WorldParam::InventRepeat => "invent_repeat",
            WorldParam::InventMoveIdle => "invent_move_idle",
            WorldParam::InventMoveBase => "invent_move_base",
            WorldParam::InventStated => "invent_stated",
            WorldParam::InventDone => "invent_done",
            WorldParam::InventLater => "invent_later",
            WorldParam::PlanToolMiss => "plan_tool_miss",
            WorldParam::PlanAcceptMiss => "plan_accept_miss",
        }
    }

    /// Sets the parameter in `settings`; a value out of its range is an error.
    pub fn apply(self, settings: &mut WorldSettings, value: f64) -> Result<(), SweepError> {
        let whole = || {
            (value >= 0.0 && value.fract() == 0.0 && value <= u32::MAX as f64)
                .then_some(value as u64)
                .ok_or(SweepError::Value {
                    param: self.as_str(),
                    value,
                    expected: "a whole number >= 0",
                })
        };
        let probability = || {
            (0.0..=1.0)
                .contains(&value)
                .then_some(value)
                .ok_or(SweepError::Value {
                    param: self.as_str(),
                    value,
                    expected: "a probability within 0..=1",
                })
        };
        match self {
            WorldParam::GuessSuccess => settings.guess_success = probability()?,
            WorldParam::StopBase => settings.slips.stop_base = probability()?,
            WorldParam::StopPerUnwritten => settings.slips.stop_per_unwritten = probability()?,
            WorldParam::StopPerKchar => settings.slips.stop_per_kchar = probability()?,
            WorldParam::MisorderPerUnwritten => {
                settings.slips.misorder_per_unwritten = probability()?
            }
            WorldParam::InventIdle => settings.slips.invent_idle = probability()?,
            WorldParam::InventBase => settings.slips.invent_base = probability()?,
            WorldParam::InventRepeat => settings.slips.invent_repeat = probability()?,
            WorldParam::InventMoveIdle => settings.slips.invent_move_idle = Some(probability()?),
            WorldParam::InventMoveBase => settings.slips.invent_move_base = Some(probability()?),
            WorldParam::InventStated => settings.slips.invent_stated = Some(probability()?),
            WorldParam::InventDone => settings.slips.invent_done = Some(probability()?),
            WorldParam::InventLater => settings.slips.invent_later = probability()?,
            WorldParam::PlanToolMiss => settings.slips.plan_tool_miss = probability()?,
            WorldParam::PlanAcceptMiss => settings.slips.plan_accept_miss = probability()?,
            WorldParam::GateNoise => settings.gate_noise = whole()? as u32,
            WorldParam::Seed => settings.seed = whole()?,
            WorldParam::TokensPerCall => settings.tokens_per_call = whole()?,
            WorldParam::CharsPerToken => settings.chars_per_token = whole()?.max(1),
        }
        Ok(())
    }
}

impl FromStr for WorldParam {
    type Err = SweepError;
    fn from_str(name: &str) -> Result<Self, SweepError> {
        WorldParam::ALL
            .into_iter()
            .find(|p| p.as_str() == name.trim())
            .ok_or_else(|| SweepError::Param(name.trim().to_string()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(
        "--sweep: unknown world parameter {0:?} (use guess_success, gate_noise, seed, \
         tokens_per_call, chars_per_token, stop_base, stop_per_unwritten, stop_per_kchar, \
         misorder_per_unwritten, invent_idle, invent_base, invent_repeat, invent_move_idle, \
         invent_move_base, invent_stated, invent_done, invent_later, plan_tool_miss or plan_accept_miss)"
    )]
    Param(String),
    #[error("--sweep: expected PARAM=V1,V2,... with at least two values, got {0:?}")]
    Shape(String),
    #[error("--sweep: {param} = {value} is not {expected}")]
    Value {
        param: &'static str,
        value: f64,
        expected: &'static str,
    },
}

/// `PARAM=V1,V2,...`: the parameter and its values, in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub param: WorldParam,
    pub values: Vec<f64>,
}

impl FromStr for Sweep {
    type Err = SweepError;
    fn from_str(text: &str) -> Result<Self, SweepError> {
        let shape = || SweepError::Shape(text.to_string());
        let (name, list) = text.split_once('=').ok_or_else(shape)?;
        let param: WorldParam = name.parse()?;
        let values = list
            .split(',')
            .map(|v| v.trim().parse::<f64>().map_err(|_| shape()))
            .collect::<Result<Vec<f64>, _>>()?;
        if values.len() < 2 || values.iter().any(|v| !v.is_finite()) {
            return Err(shape());
        }
        let mut probe = WorldSettings::default();
        for value in &values {
            param.apply(&mut probe, *value)?;
        }
        Ok(Sweep { param, values })
    }
}

/// One value of the sweep and what each strategy achieved at it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub value: f64,
    /// Per strategy: (verified, runs, mean tokens).
    pub strategies: Vec<(String, u32, u32, f64)>,
}

impl SweepPoint {
    pub fn of(value: f64, report: &Report) -> SweepPoint {
        let strategies = report
            .strategies
            .iter()
            .filter_map(|name| {
                let a = report.aggregates.get(name)?;
                Some((name.clone(), a.verified, a.runs, a.mean_tokens))
            })
            .collect();
        SweepPoint { value, strategies }
    }
}

/// The sweep's results: what `sweep.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub suite: String,
    pub param: WorldParam,
    pub simulated: bool,
    pub points: Vec<SweepPoint>,
}

impl SweepReport {
    fn strategies(&self) -> Vec<String> {
        self.points
            .first()
            .map(|p| p.strategies.iter().map(|s| s.0.clone()).collect())
            .unwrap_or_default()
    }

    /// The Markdown table: one row per value, verified success per strategy.
    pub fn markdown(&self) -> String {
        let strategies = self.strategies();
        let mut out = format!(
            "# Sweep of `{}` on suite `{}`{}\n\nVerified success (and mean tokens) per strategy \
             at each value; every other world setting as the suite states it.\n\n| {} |",
            self.param.as_str(),
            self.suite,
            if self.simulated { " (simulated)" } else { "" },
            self.param.as_str()
        );
        for name in &strategies {
            let _ = write!(out, " {name} |");
        }
        let _ = write!(out, "\n|---|{}\n", "---|".repeat(strategies.len()));
        for point in &self.points {
            let _ = write!(out, "| {} |", point.value);
            for (_, verified, runs, tokens) in &point.strategies {
                let rate = f64::from(*verified) / f64::from((*runs).max(1)) * 100.0;
                let _ = write!(out, " {verified}/{runs} ({rate:.0}%), {tokens:.0} |");
            }
            out.push('\n');
        }
        out
    }

    /// A line chart: the parameter on x, verified success on y, one line per strategy.
    pub fn svg(&self) -> String {
        const W: f64 = 640.0;
        const H: f64 = 400.0;
        const M: f64 = 60.0;
        let colors = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e"];
        let (lo, hi) = self
            .points
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), p| {
                (lo.min(p.value), hi.max(p.value))
            });
        let span = if hi > lo { hi - lo } else { 1.0 };
        let x = |v: f64| M + (v - lo) / span * (W - M - 120.0);
        let y = |rate: f64| H - M - rate * (H - M - 40.0);
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
             font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"{M}\" y=\"20\" \
             font-size=\"13\">Verified success against {} (suite {})</text>\n",
            self.param.as_str(),
            self.suite
        );
        let _ = writeln!(
            out,
            "<line x1=\"{M}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n<line \
             x1=\"{M}\" y1=\"30\" x2=\"{M}\" y2=\"{b}\" stroke=\"black\"/>",
            b = H - M,
            r = W - 110.0
        );
        for (tick, label) in [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")] {
            let _ = writeln!(out, "<text x=\"25\" y=\"{:.1}\">{label}</text>", y(tick));
        }
        for point in &self.points {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                x(point.value),
                H - M + 15.0,
                point.value
            );
        }
        for (index, name) in self.strategies().iter().enumerate() {
            let color = colors[index % colors.len()];
            let coords: Vec<String> = self
                .points
                .iter()
                .filter_map(|p| {
                    let (_, verified, runs, _) = p.strategies.iter().find(|s| &s.0 == name)?;
                    let rate = f64::from(*verified) / f64::from((*runs).max(1));
                    Some(format!("{:.1},{:.1}", x(p.value), y(rate)))
                })
                .collect();
            let _ = writeln!(
                out,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n\
                 <text x=\"{}\" y=\"{}\" fill=\"{color}\">{name}</text>",
                coords.join(" "),
                W - 100.0,
                50.0 + 16.0 * index as f64
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_parses_and_checks_its_values() {
        let sweep: Sweep = "guess_success=0.3,0.5,0.7".parse().unwrap();
        assert_eq!(sweep.param, WorldParam::GuessSuccess);
        assert_eq!(sweep.values, vec![0.3, 0.5, 0.7]);
        assert!("guess_success=0.3".parse::<Sweep>().is_err());
        assert!("guess_success=0.3,1.5".parse::<Sweep>().is_err());
        assert!("gate_noise=0,1.5".parse::<Sweep>().is_err());
        assert!("temperature=0,1".parse::<Sweep>().is_err());
        assert!("guess_success".parse::<Sweep>().is_err());
        let mut settings = WorldSettings::default();
        WorldParam::GateNoise.apply(&mut settings, 3.0).unwrap();
        assert_eq!(settings.gate_noise, 3);
    }
}
