//! Following the matrix through the service: [`drive`] keeps a bounded window of runs in the
//! service (enough to keep every worker busy), polls only those, and submits the next run as
//! one finishes. Submitting the whole matrix at once had the evaluator poll every queued run
//! every 100 ms: 400 queued live runs cost the debug binary half a core of the two the model
//! server needed.

use std::collections::{BTreeSet, VecDeque};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::error::EvalError;
use super::report::{Record, RunInputs};
use super::resume::{RunKey, key_of};
use super::runner::{EvalParams, Owed, matrix};
use super::suite::Suite;
use super::world::{META_KEY, World};
use cairn::domain::event::Event;
use cairn::domain::task::{Strategy, Task};
use cairn::store::{PlanVersionRecord, Store};

/// Runs in the service at once per worker: one running, one queued behind it.
const IN_FLIGHT_PER_WORKER: usize = 2;

/// One submitted run, with its place in the matrix.
struct Submitted {
    index: usize,
    task: String,
    strategy: Strategy,
    repeat: u32,
    id: uuid::Uuid,
}

/// What following the runs needs besides the parameters.
struct Follow<'a> {
    params: &'a EvalParams,
    suite: &'a Suite,
    world: &'a World,
    store: &'a Arc<dyn Store>,
    base: &'a str,
    http: reqwest::Client,
    wall_ms: u64,
}

/// Submits every (task, strategy, repeat) not already `done` to the service at `base` and
/// follows each run until it is terminal; the world's acceptance check decides verified
/// success, and each finished run is appended to the run log at once. Records come back in
/// matrix order, whatever order the runs finished in.
pub async fn drive(
    params: &EvalParams,
    suite: &Suite,
    world: &World,
    store: &Arc<dyn Store>,
    base: &str,
    owed: Owed<'_>,
) -> Result<Vec<Record>, EvalError> {
    let finished: BTreeSet<RunKey> = owed.done.iter().map(key_of).collect();
    let mut todo: VecDeque<(usize, RunKey)> = matrix(params, suite)
        .into_iter()
        .filter(|key| !finished.contains(key))
        .take(params.max_runs.unwrap_or(usize::MAX))
        .enumerate()
        .collect();
    let total = todo.len();
    let (wall_ms, limit) = params.timings(total);
    let follow = Follow {
        params,
        suite,
        world,
        store,
        base,
        http: reqwest::Client::new(),
        wall_ms,
    };
    let window = params.workers.max(1) * IN_FLIGHT_PER_WORKER;
    let deadline = Instant::now() + limit;
    let mut in_flight: Vec<Submitted> = Vec::new();
    let mut records: Vec<(usize, Record)> = Vec::with_capacity(total);
    while records.len() < total {
        if Instant::now() > deadline {
            return Err(EvalError::Api(format!(
                "{} of {total} runs still unfinished after {} s",
                total - records.len(),
                limit.as_secs()
            )));
        }
        while in_flight.len() < window {
            let Some((index, key)) = todo.pop_front() else {
                break;
            };
            if let Some(run) = follow.submit(index, key).await? {
                in_flight.push(run);
            }
        }
        if in_flight.is_empty() {
            break;
        }
        let before = records.len();
        let mut still = Vec::with_capacity(in_flight.len());
        for run in in_flight {
            match follow.finished(&run, records.len() + 1, total).await? {
                Some(record) => {
                    owed.log.append(&record)?;
                    records.push((run.index, record));
                }
                None => still.push(run),
            }
        }
        in_flight = still;
        if records.len() == before {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    records.sort_by_key(|(index, _)| *index);
    Ok(records.into_iter().map(|(_, record)| record).collect())
}

impl Follow<'_> {
    /// Creates the run `key` with `POST /v1/tasks` (`None` when the suite or the strategy list
    /// no longer holds it).
    async fn submit(&self, index: usize, key: RunKey) -> Result<Option<Submitted>, EvalError> {
        let (task_id, strategy_name, repeat) = key;
        let Some(task) = self.suite.task(&task_id) else {
            return Ok(None);
        };
        let Some(strategy) = self
            .params
            .strategies
            .iter()
            .find(|s| s.as_str() == strategy_name)
        else {
            return Ok(None);
        };
        let mut body = json!({
            "goal": task.goal,
            "strategy": strategy,
            "budget": {"tokens": task.budget_tokens, "tool_calls": 60, "wall_ms": self.wall_ms},
            "metadata": {META_KEY: {"task": task.id, "repeat": repeat, "suite": self.suite.name}},
        });
        // A task offered its own tools submits them as the task's tool list.
        if let (Some(tools), Some(object)) = (&task.tools, body.as_object_mut()) {
            object.insert("tools".into(), json!(tools));
        }
        let url = format!("{}/v1/tasks", self.base);
        let created: Task = send(self.http.post(url).json(&body)).await?;
        Ok(Some(Submitted {
            index,
            task: task.id.clone(),
            strategy: *strategy,
            repeat,
            id: created.id,
        }))
    }

    /// The record of `run` once it is terminal (printed as the `nth` of `total` finished).
    async fn finished(
        &self,
        run: &Submitted,
        nth: usize,
        total: usize,
    ) -> Result<Option<Record>, EvalError> {
        let url = format!("{}/v1/tasks/{}", self.base, run.id);
        let task: Task = send(self.http.get(url)).await?;
        if !task.status.is_terminal() {
            return Ok(None);
        }
        let Some(suite_task) = self.suite.task(&run.task) else {
            return Ok(None);
        };
        // A planned task has no answer of its own: what it found is in its artifacts.
        let artifacts = self.store.list_artifacts(&task.tenant_id, task.id).await?;
        let found = Value::Array(artifacts.into_iter().map(|a| a.value).collect());
        let (events, plans) = history(self.store.as_ref(), &task).await?;
        let record = Record::from_run(&RunInputs {
            task: suite_task,
            strategy: run.strategy,
            repeat: run.repeat,
            run: &task,
            world: self.world,
            found: &found,
            events: &events,
            plans: &plans,
        });
        if self.params.progress {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "[{nth:>4}/{total}] {:<24} {:<9} #{} {:<16} verified={} tokens={}",
                run.task,
                run.strategy.as_str(),
                run.repeat,
                task.status.as_str(),
                record.verified,
                record.tokens
            );
        }
        Ok(Some(record))
    }
}

/// Events read from the store per request.
const EVENT_PAGE: i64 = 500;

/// A finished run's events, in order, and its plan versions: what its funnel is read from.
async fn history(
    store: &dyn Store,
    task: &Task,
) -> Result<(Vec<Event>, Vec<PlanVersionRecord>), EvalError> {
    let mut events: Vec<Event> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.seq);
        let page = store
            .list_events(&task.tenant_id, task.id, after, EVENT_PAGE)
            .await?;
        let more = page.len() as i64 == EVENT_PAGE;
        events.extend(page);
        if !more {
            break;
        }
    }
    let plans = store.list_plan_versions(&task.tenant_id, task.id).await?;
    Ok((events, plans))
}

async fn send<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
) -> Result<T, EvalError> {
    let response = request
        .send()
        .await
        .map_err(|e| EvalError::Api(e.to_string()))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|e| EvalError::Api(e.to_string()))?;
    if !status.is_success() {
        return Err(EvalError::Api(format!("{status}: {body}")));
    }
    serde_json::from_value(body).map_err(|e| EvalError::Api(e.to_string()))
}
