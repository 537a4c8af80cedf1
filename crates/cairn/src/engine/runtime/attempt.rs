//! What every part of one task's run shares: the journal, the ports, the settings, the tool
//! registry, and the two ways of spending budget (asking a model, calling a tool), each timed
//! here so wall-clock charges do not depend on what a port reports.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::Value;

use super::checkpoint::Spend;
use super::journal::Journal;
use super::ports::{
    FailureKind, ModelCall, ModelPort, ModelReply, PortError, Purpose, Sampling, ToolCall,
    ToolPort, ToolReply, ToolSpec, Turn, answer_budget,
};
use super::reserve::{Hold, Refusal};
use crate::domain::settings::EngineSettings;
use crate::domain::task::Task;
use crate::engine::prompts::Prompt;
use crate::engine::{Halt, RunOutcome, StopSignal};

/// One question to a model: the prompt (a reviewable file, see [`crate::engine::prompts`]),
/// the structured input, and the JSON Schema the answer must match (sent as
/// `response_format`; every engine call carries one, see [`crate::engine::schemas`]).
pub struct Question<'a> {
    pub purpose: Purpose,
    /// The milestone the call is about (`direct`, a baseline's name), if any.
    pub milestone: Option<&'a str>,
    /// 1-based attempt for this purpose and milestone.
    pub attempt: u32,
    pub prompt: &'a Prompt,
    pub input: Value,
    /// Earlier answers and their outcomes, as chat turns ([`Turn`]); empty for most questions.
    pub turns: Vec<Turn>,
    pub schema: Value,
}

/// A model answer or failure, with what it cost and the prompt version that asked.
pub struct Asked {
    pub reply: Result<ModelReply, PortError>,
    pub spend: Spend,
    /// [`Prompt::version`] of the prompt, recorded in the call's events.
    pub prompt: String,
    /// The call's reservation ([`super::reserve`]): kept by the caller until `spend` is
    /// charged, so no other call of the task counts on what this one may yet be charged.
    pub hold: Option<Hold>,
}

/// A tool answer or failure, with what it cost.
pub struct Called {
    pub reply: Result<ToolReply, PortError>,
    pub spend: Spend,
    /// The call's reservation, as for [`Asked::hold`].
    pub hold: Option<Hold>,
}

/// The shared context of one attempt at a task.
pub struct Attempt {
    pub journal: Journal,
    pub models: Arc<dyn ModelPort>,
    pub tools: Arc<dyn ToolPort>,
    pub config: EngineSettings,
    pub specs: BTreeMap<String, ToolSpec>,
    /// The tools' argument validators, shared by every attempt of the engine.
    pub validators: Arc<Validators>,
    /// Set when one milestone's outcome ends the others' runs (failure, exhaustion, L3).
    pub halt: std::sync::atomic::AtomicBool,
    /// What a person signed off, and what this attempt waits for ([`super::approvals`]).
    pub approvals: super::signoff::Approvals,
    /// The previous attempt parked for a sign-off: its active milestones resume where they
    /// stopped, without the re-check a crash calls for.
    pub after_park: bool,
    /// The worst cases of this attempt's calls in flight, per unit ([`super::reserve`]): what
    /// the books may yet be charged beyond what they show.
    pub held: super::reserve::Holds,
    /// How much more than asked the model provider has reported ([`super::reserve`]).
    pub overreport: super::reserve::Overreport,
}

/// The argument validators of the registered tools, each compiled from its JSON Schema on
/// first use and kept by the engine for every task it runs: every step's arguments are checked
/// before its call, and compiling a schema costs far more than checking against it. A tool
/// whose schema changed (a registry reload) is compiled again.
#[derive(Default)]
pub struct Validators(std::sync::Mutex<HashMap<String, Compiled>>);

/// A schema and its compiled validator.
type Compiled = (Value, Arc<jsonschema::Validator>);

impl Validators {
    /// `spec`'s validator, or why its schema is not one.
    pub fn get(&self, spec: &ToolSpec) -> Result<Arc<jsonschema::Validator>, String> {
        let known = |map: &HashMap<String, Compiled>| {
            map.get(&spec.name)
                .filter(|(schema, _)| *schema == spec.schema)
                .map(|(_, validator)| validator.clone())
        };
        if let Some(found) = self.0.lock().ok().and_then(|map| known(&map)) {
            return Ok(found);
        }
        let compiled = Arc::new(crate::domain::dialect::validator(&spec.schema)?);
        // A poisoned lock only costs the cache: the validator is still used.
        if let Ok(mut map) = self.0.lock() {
            map.insert(spec.name.clone(), (spec.schema.clone(), compiled.clone()));
        }
        Ok(compiled)
    }
}

impl Attempt {
    /// True when the run should stop at the next durable point.
    pub fn stopping(&self) -> bool {
        self.halt.load(Ordering::SeqCst) || self.journal.ctx().stop_requested().is_some()
    }

    pub fn stop_outcome(&self) -> RunOutcome {
        match self.journal.ctx().stop_requested() {
            Some(StopSignal::LeaseLost) => RunOutcome::LeaseLost,
            _ => RunOutcome::Yielded,
        }
    }

    pub fn task(&self) -> &Task {
        &self.journal.ctx().task
    }

    /// Asks a model; the spend includes the tokens of a failed call, which were still used.
    pub async fn ask(&self, question: Question<'_>) -> Asked {
        self.ask_sampled(question, Sampling::Endpoint).await
    }

    /// [`Attempt::ask`] with the given sampling. The call is first sized to what the books
    /// have left ([`super::reserve`]); one they cannot cover at all is not sent, and fails as a
    /// permanent model failure that cost nothing.
    pub async fn ask_sampled(&self, question: Question<'_>, sampling: Sampling) -> Asked {
        let started = Instant::now();
        let prompt = question.prompt.version();
        let wanted = answer_budget(question.purpose);
        let mut call = ModelCall {
            purpose: question.purpose,
            task_id: self.task().id,
            milestone: question.milestone.map(str::to_string),
            attempt: question.attempt,
            prompt: question.prompt.text.to_string(),
            input: question.input,
            turns: question.turns,
            schema: Some(question.schema),
            sampling,
            max_tokens: wanted,
            retry_max_tokens: wanted.saturating_mul(2),
        };
        let charged_to = self.charged_to(question.milestone).await;
        let hold = match self
            .reserve_model_call(&mut call, charged_to.as_deref())
            .await
        {
            Ok(hold) => hold,
            Err(refusal) => {
                let message = match refusal {
                    Refusal::Budget(unit) => format!(
                        "not sent: its smallest answer would cost more {} than the milestone and \
                         the reserve have left",
                        unit.as_str()
                    ),
                    // The journal is closed: whatever the caller makes of this, the attempt
                    // writes nothing more and ends with the halt.
                    Refusal::Stopped(halt) => format!("not sent: {halt}"),
                };
                return Asked {
                    reply: Err(PortError::new(FailureKind::Permanent, message)),
                    spend: Spend::default(),
                    prompt,
                    hold: None,
                };
            }
        };
        let sent = super::reserve::Sent {
            purpose: call.purpose,
            milestone: question.milestone,
            bound: call.prompt_bound(),
            max_tokens: u64::from(call.max_tokens),
            started,
            wall_limit_ms: hold.wall_limit_ms,
        };
        let reply = super::reserve::within(hold.wall_limit_ms, self.models.complete(call)).await;
        let spend = self.settle_model_call(sent, &reply).await;
        Asked {
            reply,
            spend,
            prompt,
            hold: Some(hold),
        }
    }

    /// The account a call about `milestone` is charged to: the milestone's when the books have
    /// one (a tactical or check call), the task's overhead otherwise (the gate, the planners,
    /// the goal verifier, the direct loop and the baselines, whose labels are not milestones).
    async fn charged_to(&self, milestone: Option<&str>) -> Option<String> {
        let milestone = milestone?;
        self.journal
            .read(|state| {
                state
                    .ledger
                    .as_ref()
                    .and_then(|l| {
                        l.account(milestone, crate::domain::ledger::Unit::Tokens)
                            .ok()
                    })
                    .map(|_| milestone.to_string())
            })
            .await
    }

    /// The registered tools with side effects (what the gate's heuristic calls writers).
    pub fn writers(&self) -> Vec<&str> {
        self.specs
            .values()
            .filter(|t| t.side_effects)
            .map(|t| t.name.as_str())
            .collect()
    }

    /// Calls a tool, after committing whatever is staged: nothing staged waits past a tool
    /// call (the journal's rule), whichever part of the engine makes it. `Err` is the flush's.
    /// A call that needs a sign-off nobody gave stops the attempt ([`Halt::Parked`]); one a
    /// person rejected is answered as the tool's refusal, and costs no call.
    pub async fn call_tool(
        &self,
        call: ToolCall,
        charged_to: Option<&str>,
    ) -> Result<Called, Halt> {
        match self.gate_call(&call).await? {
            super::signoff::CallGate::Run => {}
            super::signoff::CallGate::Refused(why) => {
                return Ok(Called {
                    reply: Ok(ToolReply {
                        error: Some(why),
                        ..ToolReply::default()
                    }),
                    spend: Spend::default(),
                    hold: None,
                });
            }
            super::signoff::CallGate::Wait => {
                self.halt.store(true, Ordering::SeqCst);
                return Err(Halt::Parked);
            }
        }
        let price = self.config.prices.tool(&call.tool);
        let hold = match self.reserve_tool_call(&call.tool, charged_to, price).await {
            Ok(hold) => hold,
            Err(Refusal::Stopped(halt)) => return Err(halt),
            Err(Refusal::Budget(unit)) => {
                let message = format!(
                    "not sent: the milestone and the reserve have no {} left for it",
                    unit.as_str()
                );
                return Ok(Called {
                    reply: Err(PortError::new(FailureKind::Permanent, message)),
                    spend: Spend::default(),
                    hold: None,
                });
            }
        };
        self.journal.flush().await?;
        let started = Instant::now();
        let limit = hold.wall_limit_ms;
        let reply = super::reserve::within(limit, self.tools.call(call)).await;
        // A stored receipt answered: nothing was sent, so nothing is priced.
        let sent = !matches!(&reply, Ok(r) if r.from_receipt);
        Ok(Called {
            reply,
            spend: Spend {
                tokens: 0,
                tool_calls: 1,
                wall_ms: super::reserve::wall_ms(started, limit),
                cost: if sent { price.unwrap_or(0) } else { 0 },
            },
            hold: Some(hold),
        })
    }

    /// Full schemas of the named tools, for the tactical prompt.
    pub fn tool_schemas(&self, names: &[String]) -> Vec<&ToolSpec> {
        names.iter().filter_map(|n| self.specs.get(n)).collect()
    }
}

/// Shortens a value for an event or a prompt: long strings are cut, long arrays trimmed.
pub fn brief(value: &Value, max_chars: usize) -> Value {
    let text = value.to_string();
    if text.len() <= max_chars {
        return value.clone();
    }
    let cut: String = text.chars().take(max_chars).collect();
    Value::String(format!("{cut}…"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(schema: Value) -> ToolSpec {
        ToolSpec {
            name: "lookup".into(),
            description: String::new(),
            schema,
            side_effects: false,
            artifacts: Vec::new(),
        }
    }

    #[test]
    fn a_validator_is_compiled_once_and_again_when_its_schema_changes() {
        let validators = Validators::default();
        let first = spec(json!({"type": "object", "required": ["q"]}));
        let a = validators.get(&first).unwrap();
        let b = validators.get(&first).unwrap();
        assert!(
            Arc::ptr_eq(&a, &b),
            "the second get is answered from the cache"
        );
        assert!(!a.is_valid(&json!({})));

        let changed = spec(json!({"type": "object"}));
        let c = validators.get(&changed).unwrap();
        assert!(!Arc::ptr_eq(&a, &c), "a changed schema is compiled again");
        assert!(c.is_valid(&json!({})));

        assert!(validators.get(&spec(json!({"type": 7}))).is_err());
    }
}
