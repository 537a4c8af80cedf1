//! The tools' side of the world: which step a call means, the injected faults, and what a
//! valid performance records and reveals.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{LOCATE, Receipts, TaskWorld, resolve_truth};
use crate::suite::{FaultFires, FaultKind, FaultSpec, SuiteTask, TaskStep};
use cairn::engine::runtime::ports::{FailureKind, PortError, ToolReply};

/// An argument as text: strings as they are, numbers and booleans written out (a real model
/// may send `8812` where the suite says `"8812"`).
fn arg(args: &Value, name: &str) -> String {
    match args.get(name) {
        Some(Value::String(text)) => text.clone(),
        Some(value @ (Value::Number(_) | Value::Bool(_))) => value.to_string(),
        _ => String::new(),
    }
}

/// Text compared as a reader would: case, surrounding quotes and runs of whitespace ignored.
pub(super) fn normal(text: &str) -> String {
    text.trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether a given argument means the expected value: equal as a reader compares, (for a
/// value of three characters or more) containing it, as in `"Error: err-queue-full"`, or, for a
/// value of several words, holding them in order with others between, as `df -h /var` holds
/// `df /var`.
pub(super) fn means(given: &str, expected: &str) -> bool {
    let (given, expected) = (normal(given), normal(expected));
    let words: Vec<&str> = expected.split(' ').collect();
    let mut said = given.split(' ');
    given == expected
        || (expected.chars().count() >= 3 && given.contains(&expected))
        || (words.len() >= 2 && words.iter().all(|w| said.any(|s| s == *w)))
}

/// Whether an answer states a true fact as a reader would accept it: containing it, or every
/// word of it in any order and punctuation ("the billing service runs version 4.2.1" states
/// `billing-4.2.1`; "team quokka owns it" states `team-quokka`). A real model rephrases the
/// world's compound values; the world's own policy copies them.
pub(super) fn states(answer: &str, fact: &str) -> bool {
    let (answer, fact) = (normal(answer), normal(fact));
    if answer.contains(&fact) {
        return true;
    }
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '.'))
            .map(|w| w.trim_matches('.').to_string())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let said = words(&answer);
    let needed = words(&fact);
    !needed.is_empty() && needed.iter().all(|w| said.contains(w))
}

fn error(message: String) -> Result<ToolReply, PortError> {
    Ok(ToolReply {
        error: Some(message),
        ..ToolReply::default()
    })
}

fn output(output: Value) -> Result<ToolReply, PortError> {
    Ok(ToolReply {
        output,
        ..ToolReply::default()
    })
}

/// The tools' behaviour: perform a step when the arguments are right, fire the fault.
/// `declared`: the suite's world declares its tools' artifacts (`[world] declare_artifacts`),
/// so an answer also carries the artifact named after its tool.
pub(super) fn perform(
    task: &SuiteTask,
    world: &mut TaskWorld,
    receipts: &Receipts,
    call: (&str, &Value),
    declared: bool,
) -> Result<ToolReply, PortError> {
    let (tool, args) = call;
    if tool == LOCATE {
        return locate(task, world, args).map(|reply| named(reply, LOCATE, declared));
    }
    let candidates: Vec<&TaskStep> = task.steps.iter().filter(|s| s.tool == tool).collect();
    if candidates.is_empty() {
        // As a real tool answers a query about something that does not exist: nothing found
        // (not "unavailable", which invites a retry of the same call).
        return error(format!("{tool}: not found: nothing matches {args}"));
    }
    let step = select_step(&candidates, world, args)?;
    // Order is the world's: a step whose prerequisites have not happened cannot happen (the
    // host does not exist yet, the profiler is not installed), whatever its arguments say.
    let pending: Vec<String> = task
        .prerequisites(step)
        .into_iter()
        .filter(|p| !world.performed.contains_key(p))
        .collect();
    if !pending.is_empty() {
        world.misordered += 1;
        return error(format!(
            "{tool}: cannot run yet: {} has not happened (signal order:{})",
            pending.join(", "),
            step.id
        ));
    }
    let fault = task.fault.as_ref().filter(|f| f.step == step.id);
    if let Some(reply) = fault.and_then(|f| fault_before_args(f, world, tool, &step.id)) {
        return reply;
    }
    // A fault that fires whatever the arguments meets every call of the step's tool.
    let any_args = fault.filter(|f| f.fires == FaultFires::AnyArgs);
    if let Some(reply) = any_args.and_then(|f| fault_after_args(f, world, step, tool, args)) {
        return reply;
    }
    for (name, template) in &step.args {
        let expected = resolve_truth(template, &world.facts);
        let given = arg(args, name);
        if !means(&given, &expected) {
            return error(format!("{tool}: not found: {name}={given:?}"));
        }
    }
    if let Some(reply) = fault.and_then(|f| fault_after_args(f, world, step, tool, args)) {
        return reply;
    }
    Ok(named(record(task, world, step, receipts), tool, declared))
}

/// The reply with its output also under the tool's declared artifact, where tools declare.
fn named(mut reply: ToolReply, tool: &str, declared: bool) -> ToolReply {
    if declared && reply.error.is_none() {
        reply
            .artifacts
            .insert(tool.to_string(), reply.output.clone());
    }
    reply
}

/// The remedy tool for `missing_file`: it finds the file only where that fault is injected.
fn locate(task: &SuiteTask, world: &mut TaskWorld, args: &Value) -> Result<ToolReply, PortError> {
    let wanted = arg(args, "ref");
    // The reference is the step the signal named, or the path that was missing.
    let missing = task
        .fault
        .as_ref()
        .filter(|f| f.kind == FaultKind::MissingFile);
    let hit = missing.is_some_and(|f| {
        let path = task
            .steps
            .iter()
            .find(|s| s.id == f.step)
            .and_then(|s| s.args.values().next())
            .map(|p| resolve_truth(p, &world.facts));
        means(&wanted, &f.step) || path.is_some_and(|p| means(&wanted, &p))
    });
    if let Some(sid) = missing.map(|f| f.step.clone()).filter(|_| hit) {
        world.located = true;
        return output(json!({"found": true, "signal": format!("located:{sid}")}));
    }
    error(format!("locate: nothing to locate for {wanted:?}"))
}

/// The step meant is the first one of this tool whose arguments all match; failing that,
/// the first one not yet performed (its mismatching argument is then reported).
fn select_step<'t>(
    candidates: &[&'t TaskStep],
    world: &TaskWorld,
    args: &Value,
) -> Result<&'t TaskStep, PortError> {
    let matches = |step: &TaskStep| {
        step.args
            .iter()
            .all(|(k, v)| means(&arg(args, k), &resolve_truth(v, &world.facts)))
    };
    candidates
        .iter()
        .find(|s| matches(s))
        .or_else(|| {
            candidates
                .iter()
                .find(|s| !world.performed.contains_key(&s.id))
        })
        .or_else(|| candidates.first())
        .copied()
        .ok_or_else(|| PortError::new(FailureKind::Permanent, "no step"))
}

/// Faults that fire whatever the arguments: a timeout, a vanished resource.
fn fault_before_args(
    fault: &FaultSpec,
    world: &mut TaskWorld,
    tool: &str,
    sid: &str,
) -> Option<Result<ToolReply, PortError>> {
    match fault.kind {
        FaultKind::ToolTimeout if world.fault_hits < fault.times.unwrap_or(1) => {
            world.fault_hits += 1;
            Some(Err(PortError::new(
                FailureKind::Transient,
                format!(
                    "{tool}: timed out after 30000 ms (signal timeout:{sid}){}",
                    remedy(fault, "call it again")
                ),
            )))
        }
        FaultKind::ResourceDisappears if !world.gone => {
            world.gone = true;
            world.fault_hits += 1;
            let fact = fault.fact.clone().unwrap_or_default();
            let old = world.facts.get(&fact).cloned().unwrap_or_default();
            world.facts.insert(fact, format!("{old}-renewed"));
            Some(error(format!(
                "{tool}: resource {old} is gone (signal gone:{sid}){}",
                remedy(fault, "look it up again for its new id")
            )))
        }
        _ => None,
    }
}

/// Faults that fire on a call with the right arguments until the documented remedy is applied.
fn fault_after_args(
    fault: &FaultSpec,
    world: &mut TaskWorld,
    step: &TaskStep,
    tool: &str,
    args: &Value,
) -> Option<Result<ToolReply, PortError>> {
    let sid = &step.id;
    match fault.kind {
        FaultKind::MissingFile if !world.located => {
            world.fault_hits += 1;
            let path = step.args.values().next().cloned().unwrap_or_default();
            let path = resolve_truth(&path, &world.facts);
            let how = format!("call {LOCATE} with ref = {path:?}, then {tool} again");
            Some(error(format!(
                "{tool}: no such file: {path} (signal missing:{sid}){}",
                remedy(fault, &how)
            )))
        }
        FaultKind::UnexpectedResponse if normal(&arg(args, "api")) != "v2" => {
            world.fault_hits += 1;
            Some(output(stated(
                json!({"status": "moved", "detail": "this endpoint answers in API v2",
                       "signal": format!("moved:{sid}")}),
                fault,
                "call again with api = \"v2\"",
            )))
        }
        FaultKind::InvalidIntermediate if normal(&arg(args, "validate")) != "true" => {
            world.fault_hits += 1;
            Some(output(stated(
                json!({"ok": true, "valid": false,
                       "problems": ["the produced data does not match its schema"],
                       "signal": format!("invalid:{sid}")}),
                fault,
                "call again with validate = true",
            )))
        }
        FaultKind::IncompleteEvidence if normal(&arg(args, "page")) != "2" => {
            world.fault_hits += 1;
            Some(output(stated(
                json!({"items": ["first half of the evidence"], "complete": false,
                       "next_page": "2", "signal": format!("partial:{sid}")}),
                fault,
                "call again with page = 2",
            )))
        }
        _ => None,
    }
}

/// The remedy a fault that fires whatever the arguments states, as the end of its message.
fn remedy(fault: &FaultSpec, how: &str) -> String {
    match fault.fires {
        FaultFires::AnyArgs => format!("; to recover: {how}"),
        FaultFires::AfterArgs => String::new(),
    }
}

/// A fault's answer with its remedy stated, where the fault states it.
fn stated(mut answer: Value, fault: &FaultSpec, how: &str) -> Value {
    if fault.fires == FaultFires::AnyArgs
        && let Some(object) = answer.as_object_mut()
    {
        object.insert("remedy".into(), json!(how));
    }
    answer
}

/// A valid performance: count it (and a repeated side effect), reveal the step's facts.
fn record(
    task: &SuiteTask,
    world: &mut TaskWorld,
    step: &TaskStep,
    receipts: &Receipts,
) -> ToolReply {
    let sid = step.id.clone();
    let count = world.performed.entry(sid.clone()).or_insert(0);
    *count += 1;
    if *count > 1 && step.writes {
        world.repeated_side_effects += 1;
    }
    let mut revealed: Map<String, Value> = step
        .reveals
        .keys()
        .map(|k| {
            (
                k.clone(),
                json!(world.facts.get(k).cloned().unwrap_or_default()),
            )
        })
        .collect();
    revealed.insert("receipt".into(), json!(receipts.of(&sid)));
    if world.gone
        && let Some(fact) = task.fault.as_ref().and_then(|f| f.fact.clone())
        && step.reveals.contains_key(&fact)
    {
        revealed.insert("signal".into(), json!(format!("renewed:{fact}")));
    }
    ToolReply {
        from_receipt: false,
        output: Value::Object(revealed.clone()),
        artifacts: BTreeMap::from([(sid, Value::Object(revealed))]),
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_compared_as_a_reader_would() {
        assert!(means("  Billing ", "billing"));
        assert!(means("\"team-quokka\"", "Team-Quokka"));
        assert!(means("Error:  err-queue-full", "err-queue-full"));
        assert!(means("total-18400EUR", "total-18400eur"));
        assert!(!means("guess-cause-0", "off-by-one-in-peek"));
        assert!(!means("v", "v2"));
        // Short values must be equal, not merely contained.
        assert!(!means("v22", "v2"));
        // Several words: in order, others between.
        assert!(means("df -h /var", "df /var"));
        assert!(!means("/var df", "df /var"));
        assert!(!means("du /var", "df /var"));
        assert!(means("V2", "v2"));
        assert_eq!(arg(&json!({"build": 8812}), "build"), "8812");
        assert_eq!(arg(&json!({"validate": true}), "validate"), "true");
    }
}
