//! The fair suite (`suites/reachable`) keeps its rules: every step argument is stated in the goal
//! or carried from an earlier output, carried values are opaque ids, the categories and every
//! failure class are there (each fault firing whatever the arguments), each task that carries a
//! value has a control stating it, and each task is offered its own tools plus a few documented
//! distractors of at most three arguments.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cairn_eval::suite::{Category, FaultFires, FaultKind, Suite, SuiteTask, TaskStep, fact_refs};
use cairn_eval::world::LOCATE;

const CONTROL: &str = "-control";

fn suite() -> Suite {
    Suite::load(Path::new("suites/reachable")).expect("the reachable suite loads")
}

/// The tasks that are not controls.
fn tasks(suite: &Suite) -> Vec<&SuiteTask> {
    suite
        .tasks
        .iter()
        .filter(|t| !t.id.ends_with(CONTROL))
        .collect()
}

/// The fact an argument carries when it is exactly one `{fact}` reference.
fn carried(value: &str) -> Option<String> {
    let refs = fact_refs(value);
    (refs.len() == 1 && value == format!("{{{}}}", refs[0])).then(|| refs[0].clone())
}

/// The true values of the facts `task`'s step arguments carry.
fn carried_values(task: &SuiteTask) -> BTreeSet<String> {
    let revealed: BTreeMap<&String, &String> =
        task.steps.iter().flat_map(|s| s.reveals.iter()).collect();
    task.steps
        .iter()
        .flat_map(|s| s.args.values())
        .flat_map(|v| fact_refs(v))
        .filter_map(|fact| revealed.get(&fact).map(|v| (*v).clone()))
        .collect()
}

fn step_tools(task: &SuiteTask) -> BTreeSet<&str> {
    task.steps.iter().map(|s| s.tool.as_str()).collect()
}

#[test]
fn every_argument_is_in_the_goal_or_carried_from_an_earlier_output() {
    let suite = suite();
    for task in &suite.tasks {
        let goal = task.goal.to_lowercase();
        let mut known: BTreeSet<&str> = BTreeSet::new();
        for step in &task.steps {
            for (name, value) in &step.args {
                match carried(value) {
                    Some(fact) => assert!(
                        known.contains(fact.as_str()),
                        "{} step {} arg {name}: {{{fact}}} is not revealed by an earlier step",
                        task.id,
                        step.id
                    ),
                    None => assert!(
                        fact_refs(value).is_empty() && goal.contains(&value.to_lowercase()),
                        "{} step {} arg {name} = {value:?} is neither in the goal nor one \
                         carried fact",
                        task.id,
                        step.id
                    ),
                }
            }
            known.extend(step.reveals.keys().map(String::as_str));
        }
    }
}

#[test]
fn revealed_values_are_opaque_ids_that_no_goal_of_a_task_gives_away() {
    let suite = suite();
    for task in &suite.tasks {
        for (fact, value) in task.steps.iter().flat_map(|s| s.reveals.iter()) {
            let digit = value.chars().any(|c| c.is_ascii_digit());
            let letter = value.chars().any(|c| c.is_ascii_alphabetic());
            assert!(
                digit && letter && value.chars().count() >= 6,
                "{}: fact {fact} = {value:?} is not an opaque id",
                task.id
            );
            if !task.id.ends_with(CONTROL) {
                assert!(
                    !task.goal.to_lowercase().contains(&value.to_lowercase()),
                    "{}: the goal states {fact} = {value:?}, which a step must reveal",
                    task.id
                );
            }
        }
    }
}

/// Whether a step of `task` uses a fact an earlier step revealed.
fn carries(task: &SuiteTask) -> bool {
    !carried_values(task).is_empty()
}

fn assert_shape(task: &SuiteTask) {
    let n = task.steps.len();
    match task.category {
        Category::Simple => {
            assert!(
                n <= 1,
                "{}: a simple task takes one tool call at most",
                task.id
            );
            assert!(task.fault.is_none(), "{}", task.id);
            assert!(task.answer.is_some(), "{}: a simple task answers", task.id);
        }
        Category::Medium | Category::Uncertain => {
            assert!((2..=4).contains(&n), "{}: {n} steps", task.id);
            assert!(carries(task), "{}: no value carried between steps", task.id);
            let phased = task.steps.iter().all(|s| s.phase.is_some());
            assert!(phased, "{}: every step names its milestone", task.id);
        }
    }
    match (task.category, &task.fault) {
        (Category::Uncertain, Some(fault)) => {
            assert_eq!(fault.fires, FaultFires::AnyArgs, "{}", task.id);
        }
        (Category::Uncertain, None) => panic!("{}: an uncertain task without a fault", task.id),
        (_, fault) => assert!(fault.is_none(), "{}: a fault outside uncertain", task.id),
    }
}

#[test]
fn the_categories_and_every_failure_class_are_there() {
    let suite = suite();
    let tasks = tasks(&suite);
    assert!(
        tasks.len() >= 20,
        "{} tasks besides the controls",
        tasks.len()
    );
    let count = |c: Category| tasks.iter().filter(|t| t.category == c).count();
    let (simple, medium, uncertain) = (
        count(Category::Simple),
        count(Category::Medium),
        count(Category::Uncertain),
    );
    assert!((4..=6).contains(&simple), "{simple} simple");
    assert!((8..=10).contains(&medium), "{medium} medium");
    assert!((6..=8).contains(&uncertain), "{uncertain} uncertain");
    for task in &suite.tasks {
        assert_shape(task);
    }
    let medium_writes = tasks
        .iter()
        .filter(|t| t.category == Category::Medium)
        .filter(|t| t.steps.iter().any(|s| s.writes))
        .count();
    assert!(medium_writes >= 2, "{medium_writes} medium tasks write");
    let kinds: BTreeSet<FaultKind> = tasks
        .iter()
        .filter_map(|t| t.fault.as_ref())
        .map(|f| f.kind)
        .collect();
    let all = [
        FaultKind::MissingFile,
        FaultKind::ToolTimeout,
        FaultKind::UnexpectedResponse,
        FaultKind::InvalidIntermediate,
        FaultKind::ResourceDisappears,
        FaultKind::IncompleteEvidence,
    ];
    for kind in all {
        assert!(kinds.contains(&kind), "no {} fault", kind.as_str());
    }
}

#[test]
fn every_task_that_carries_a_value_has_a_control_stating_it() {
    let suite = suite();
    for task in tasks(&suite).into_iter().filter(|t| carries(t)) {
        let id = format!("{}{CONTROL}", task.id);
        let control = suite
            .task(&id)
            .unwrap_or_else(|| panic!("{} carries a value but has no {id}", task.id));
        assert_eq!(control.category, task.category, "{id}");
        assert_eq!(control.steps, task.steps, "{id}: the same steps");
        assert_eq!(control.fault, task.fault, "{id}: the same fault");
        assert_eq!(control.tools, task.tools, "{id}: the same tools");
        assert_eq!(control.answer, task.answer, "{id}: the same answer");
        assert_eq!(control.targets, task.targets, "{id}: the same targets");
        let goal = control.goal.to_lowercase();
        for value in carried_values(task) {
            assert!(
                goal.contains(&value.to_lowercase()),
                "{id}: goal lacks {value}"
            );
        }
    }
    for control in suite.tasks.iter().filter(|t| t.id.ends_with(CONTROL)) {
        let base = control.id.trim_end_matches(CONTROL);
        assert!(
            suite.task(base).is_some_and(carries),
            "{} controls no task that carries a value",
            control.id
        );
    }
}

/// The remedy argument a fault's tool must document.
fn remedy_arg(kind: FaultKind) -> Option<&'static str> {
    match kind {
        FaultKind::UnexpectedResponse => Some("api"),
        FaultKind::InvalidIntermediate => Some("validate"),
        FaultKind::IncompleteEvidence => Some("page"),
        _ => None,
    }
}

fn faulted_step(task: &SuiteTask) -> Option<&TaskStep> {
    let fault = task.fault.as_ref()?;
    task.steps.iter().find(|s| s.id == fault.step)
}

#[test]
fn each_task_is_offered_its_tools_and_a_few_documented_distractors() {
    let suite = suite();
    for task in &suite.tasks {
        let tools = task
            .tools
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no tools", task.id));
        let offered: BTreeSet<&str> = tools.iter().map(String::as_str).collect();
        assert_eq!(offered.len(), tools.len(), "{}: a tool twice", task.id);
        assert!(
            offered.len() <= 6,
            "{}: {} tools offered",
            task.id,
            offered.len()
        );
        let own = step_tools(task);
        assert!(
            own.is_subset(&offered),
            "{}: {own:?} not all offered",
            task.id
        );
        let locates = task
            .fault
            .as_ref()
            .is_some_and(|f| f.kind == FaultKind::MissingFile);
        assert_eq!(offered.contains(LOCATE), locates, "{}: locate", task.id);
        let distractors = offered
            .iter()
            .filter(|t| !own.contains(*t) && **t != LOCATE)
            .count();
        assert!(
            (1..=3).contains(&distractors),
            "{}: {distractors} distractors",
            task.id
        );
        for tool in &offered {
            let doc = suite.tools.get(*tool);
            let doc = doc.unwrap_or_else(|| panic!("{}: {tool} is undocumented", task.id));
            assert!(doc.args.len() <= 3, "{tool}: {} arguments", doc.args.len());
            assert!(!doc.description.is_empty(), "{tool}: no description");
        }
        if let (Some(fault), Some(step)) = (&task.fault, faulted_step(task)) {
            let needed = match fault.kind {
                FaultKind::MissingFile => Some((LOCATE, "ref")),
                kind => remedy_arg(kind).map(|arg| (step.tool.as_str(), arg)),
            };
            if let Some((tool, arg)) = needed {
                let documented = suite
                    .tools
                    .get(tool)
                    .is_some_and(|d| d.args.contains_key(arg));
                assert!(documented, "{}: {tool} does not document {arg}", task.id);
            }
        }
    }
}

#[test]
fn tool_documents_say_where_each_argument_comes_from() {
    let suite = suite();
    let used: BTreeSet<&str> = suite.tasks.iter().flat_map(step_tools).collect();
    for (name, doc) in &suite.tools {
        assert!(
            !doc.side_effects || !used.contains(name.as_str()),
            "{name}: side_effects marks a distractor, but a step uses it"
        );
    }
    for task in &suite.tasks {
        for step in &task.steps {
            let doc = &suite.tools[&step.tool];
            for (arg, value) in &step.args {
                let text = doc
                    .args
                    .get(arg)
                    .unwrap_or_else(|| panic!("{}: {}.{arg} is undocumented", task.id, step.tool));
                let source = if carried(value).is_some() {
                    "earlier tool output"
                } else {
                    "goal"
                };
                assert!(
                    text.contains(source),
                    "{}: {}.{arg} = {value:?} comes from the {source}, but its document says \
                     {text:?}",
                    task.id,
                    step.tool
                );
            }
        }
    }
}

#[test]
fn the_world_is_the_small_model_profile_of_the_default_suite() {
    let suite = suite();
    let world = &suite.world;
    assert_eq!(world.seed, 7);
    assert_eq!(world.guess_success, 0.0);
    assert_eq!(world.tokens_per_call, 300);
    assert_eq!(world.chars_per_token, 4);
    assert!(
        !world.declare_artifacts,
        "artifacts are declared per tool, not for all"
    );
    let default = Suite::load(Path::new("suites/default")).expect("the default suite loads");
    assert_eq!(
        world.slips, default.world.slips,
        "the fitted slip rates, copied"
    );
}

/// v2 offers writing tools only to a goal that reads as a change, and a goal that reads as one
/// must be planned with a milestone: a task reads as a change exactly when a step of it writes.
#[test]
fn a_goal_reads_as_a_change_exactly_when_a_step_writes() {
    let suite = suite();
    let writers: Vec<&str> = suite
        .tools
        .keys()
        .map(String::as_str)
        .filter(|tool| {
            let doc = &suite.tools[*tool];
            doc.side_effects
                || suite
                    .tasks
                    .iter()
                    .flat_map(|t| &t.steps)
                    .any(|s| s.tool == *tool && s.writes)
        })
        .collect();
    let mut wrong = Vec::new();
    for task in &suite.tasks {
        let writes = task.steps.iter().any(|s| s.writes);
        let features = cairn::domain::gate::heuristic_features(&task.goal, &writers);
        if features.touches_writes != writes {
            wrong.push(format!("{} (writes: {writes})", task.id));
        }
    }
    assert!(wrong.is_empty(), "goals that read otherwise: {wrong:?}");
}
