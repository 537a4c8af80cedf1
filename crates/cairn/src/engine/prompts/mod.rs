//! The engine's prompts as reviewable data: one file per purpose beside this module, each with the
//! contract of its answer, one short worked example of a valid answer (a fenced `json` block,
//! checked against the answer's schema and parser by the tests), and guidance from the engine's
//! rules (docs/architecture.md, "The engine"; e.g. use earlier results, never invent them). A
//! prompt's [`Prompt::version`] (`name@` + the first 8 hex digits of the SHA-256 of its text) is
//! recorded in the events of every call it makes, so evaluations compare like with like: any edit
//! to a prompt is a new version.

use sha2::{Digest, Sha256};

/// One prompt: its name and its text (the system message of the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prompt {
    pub name: &'static str,
    pub text: &'static str,
}

impl Prompt {
    /// `name@hash8`, e.g. `strategic@1a2b3c4d`.
    pub fn version(&self) -> String {
        let digest = Sha256::digest(self.text.as_bytes());
        let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
        format!("{}@{hex}", self.name)
    }

    /// The worked example of the prompt (its first fenced `json` block), for the tests.
    pub fn examples(&self) -> Vec<&'static str> {
        self.text
            .split("```json")
            .skip(1)
            .filter_map(|rest| rest.split("```").next())
            .map(str::trim)
            .collect()
    }
}

/// The plan-or-act gate's feature estimate.
pub const GATE: Prompt = Prompt {
    name: "gate",
    text: include_str!("gate.md"),
};
/// The strategic planner: milestones with acceptance checks.
pub const STRATEGIC: Prompt = Prompt {
    name: "strategic",
    text: include_str!("strategic.md"),
};
/// The tactical planner: one milestone's steps, just in time.
pub const TACTICAL: Prompt = Prompt {
    name: "tactical",
    text: include_str!("tactical.md"),
};
/// The direct act loop.
pub const DIRECT: Prompt = Prompt {
    name: "direct",
    text: include_str!("direct.md"),
};
/// The goal-level verifier.
pub const VERIFIER: Prompt = Prompt {
    name: "verifier",
    text: include_str!("verifier.md"),
};
/// A milestone's `verifier` acceptance check.
pub const CHECK_VERIFIER: Prompt = Prompt {
    name: "check_verifier",
    text: include_str!("check_verifier.md"),
};
/// Baseline A: one model call.
pub const ONE_SHOT: Prompt = Prompt {
    name: "one_shot",
    text: include_str!("one_shot.md"),
};
/// Baseline B: one action per round.
pub const REACTIVE: Prompt = Prompt {
    name: "reactive",
    text: include_str!("reactive.md"),
};
/// Baseline C: a full list up front.
pub const V1: Prompt = Prompt {
    name: "v1",
    text: include_str!("v1.md"),
};

/// Every prompt.
pub const ALL: [Prompt; 9] = [
    GATE,
    STRATEGIC,
    TACTICAL,
    DIRECT,
    VERIFIER,
    CHECK_VERIFIER,
    ONE_SHOT,
    REACTIVE,
    V1,
];
