//! Per-tenant spend caps through the HTTP API, on both backends: the worked example's scenario
//! (`worked_example.json`) priced, every answer reported at its `max_tokens` (as a provider
//! honouring the limit could), one running task per tenant, a cap of 30,000 micro-units a day
//! (one run of the example costs about 44,000), and a clock that only moves when told to.
//!
//! A task whose next call the tenant's day cannot cover stops before it (the call is not sent),
//! keeps what it did, and waits queued for the day's end: it is not failed, since another task's
//! spend is no fault of its own. While it waits, the tenant's next submit is refused (429,
//! `/problems/spend-cap-reached`, nothing written) and its queued task is not claimed, while
//! another tenant's task submitted later runs. The next day the waiting task resumes where it
//! stopped and finishes. Every day's books stay within the cap and equal what the tasks were
//! charged, and `/v1/stats` shows the spend per day.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::clock::{Clock, ManualClock};
use cairn::domain::spend::{SpendCaps, SpendPeriod};
use cairn::store::Store;
use cairn::store::keys::{Scope, generate_key};
use chrono::{DateTime, Utc};
use engine_stack::proxy::{Provider, Returned, via};
use engine_stack::{Setup, Stack, WAIT, priced};
use serde_json::{Value, json};

const GOAL: &str = "Rename config key db.url to db.dsn in services A, B and C";
/// A day's cap: one run of the example costs about 44,000 at these prices.
const CAP: u64 = 30_000;
/// Another tenant's own cap, more than a run costs.
const GLOBEX_CAP: u64 = 10_000_000;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("a time")
        .with_timezone(&Utc)
}

/// A key of `tenant` that may read and submit.
async fn key(store: &Arc<dyn Store>, tenant: &str, now: DateTime<Utc>) -> String {
    let generated = generate_key(tenant, vec![Scope::Read, Scope::Submit], None).expect("key");
    store
        .create_api_key(generated.new, now)
        .await
        .expect("store key");
    generated.token.expose().to_string()
}

/// A client of one tenant's key.
struct Tenant<'a> {
    stack: &'a Stack,
    key: String,
}

impl Tenant<'_> {
    async fn get(&self, path: &str) -> Value {
        let response = self
            .stack
            .client
            .get(format!("{}{path}", self.stack.base))
            .header("accept", "application/json")
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status().as_u16(), 200, "GET {path}");
        response.json().await.expect("json")
    }

    /// Submits the worked example: the status, the `Retry-After` header and the body.
    async fn submit(&self) -> (u16, Option<u64>, Value) {
        let response = self
            .stack
            .client
            .post(format!("{}/v1/tasks", self.stack.base))
            .bearer_auth(&self.key)
            .json(&json!({"goal": GOAL, "strategy": "auto",
                          "budget": {"tokens": 400_000, "tool_calls": 100, "wall_ms": 600_000}}))
            .send()
            .await
            .expect("POST /v1/tasks");
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        (status, retry_after, response.json().await.expect("json"))
    }

    async fn accepted(&self) -> String {
        let (status, _, body) = self.submit().await;
        assert_eq!(status, 202, "{body:#}");
        body["id"].as_str().expect("id").to_string()
    }

    async fn events(&self, id: &str, kind: &str) -> Vec<Value> {
        let page = self
            .get(&format!("/v1/tasks/{id}/events?kinds={kind}"))
            .await;
        // The page ends with the terminal event whatever the filter.
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["data"].clone())
            .collect()
    }

    /// Waits until the task has `count` events of `kind`.
    async fn until_events(&self, id: &str, kind: &str, count: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let events = self.events(id, kind).await;
            if events.len() >= count {
                return events;
            }
            assert!(tokio::time::Instant::now() < deadline, "{id}: no {kind}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn finished(&self, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let task = self.get(&format!("/v1/tasks/{id}")).await;
            if matches!(
                task["status"].as_str(),
                Some("succeeded" | "failed" | "budget_exhausted" | "cancelled")
            ) {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{id} never ended: {task:#}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The money a task was charged, from its ledger.
    async fn charged(&self, id: &str) -> u64 {
        let ledger = self.get(&format!("/v1/tasks/{id}/ledger")).await;
        ledger["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| e["kind"] == "charge" && e["unit"] == "cost")
            .map(|e| e["amount"].as_u64().unwrap())
            .sum()
    }

    /// The spend per day `/v1/stats` shows, by the day's start.
    async fn days(&self) -> BTreeMap<String, u64> {
        let stats = self.get("/v1/stats").await;
        let spend = &stats["spend"];
        assert_eq!(spend["period"], "day", "{spend:#}");
        assert_eq!(spend["cap"].as_u64(), Some(CAP), "{spend:#}");
        assert_eq!(spend["currency"], "USD");
        spend["periods"]
            .as_array()
            .expect("periods")
            .iter()
            .map(|p| {
                let start = p["start"].as_str().expect("start").to_string();
                (start, p["cost"].as_u64().expect("cost"))
            })
            .collect()
    }
}

async fn over_the_daily_cap(postgres: bool) {
    let clock = Arc::new(ManualClock::new(at("2026-12-07T10:00:00Z")));
    let mut settings = priced();
    settings.spend_caps = SpendCaps {
        period: SpendPeriod::Day,
        default: Some(CAP),
        tenants: BTreeMap::from([("globex".to_string(), GLOBEX_CAP)]),
    };
    let returned = Arc::new(Mutex::new(Returned::default()));
    let setup = Setup {
        postgres,
        settings,
        via: Some(via(Provider::AtLimit, returned)),
        clock: clock.clone(),
        max_running_per_tenant: 1,
    };
    let stack = Stack::start_setup("worked_example.json", setup).await;
    let now = clock.now();
    let acme = Tenant {
        key: key(&stack.store, "acme", now).await,
        stack: &stack,
    };
    let globex = Tenant {
        key: key(&stack.store, "globex", now).await,
        stack: &stack,
    };

    // `first` runs; `second` waits behind it (one running task per tenant).
    let first = acme.accepted().await;
    let second = acme.accepted().await;
    let released = acme.until_events(&first, "task.released", 1).await;
    assert_eq!(released[0]["reason"], "spend_cap", "{released:#?}");
    assert_eq!(released[0]["not_before"], "2026-12-08T00:00:00Z");
    let limited = acme.events(&first, "ledger.limited").await;
    let tenant_limited: Vec<_> = limited.iter().filter(|e| e["scope"] == "tenant").collect();
    assert_eq!(tenant_limited.len(), 1, "{limited:#?}");
    assert_eq!(tenant_limited[0]["refused"], "cost");
    let task = acme.get(&format!("/v1/tasks/{first}")).await;
    assert_eq!(task["status"], "queued", "waiting, not failed: {task:#}");

    // The day's books: within the cap, and exactly what the task was charged.
    let day_one = acme.charged(&first).await;
    assert!(day_one > 0 && day_one <= CAP, "{day_one} spent");
    let days = acme.days().await;
    assert_eq!(days.get("2026-12-07T00:00:00Z"), Some(&day_one), "{days:?}");

    // The next submit is refused, in plain words, and writes nothing.
    let (status, retry_after, problem) = acme.submit().await;
    assert_eq!(status, 429, "{problem:#}");
    assert_eq!(problem["type"], "/problems/spend-cap-reached");
    assert!(
        problem["detail"].as_str().unwrap().contains("acme"),
        "{problem:#}"
    );
    assert_eq!(retry_after, Some(14 * 3600), "until midnight UTC");
    let listed = acme.get("/v1/tasks?limit=100").await;
    assert_eq!(
        listed["items"].as_array().unwrap().len(),
        2,
        "nothing written"
    );

    // The queued task is passed over: another tenant's, submitted after it, runs and ends.
    let other = globex.accepted().await;
    let ended = globex.finished(&other).await;
    assert_eq!(ended["status"], "succeeded", "{ended:#}");
    let waiting = acme.get(&format!("/v1/tasks/{second}")).await;
    assert_eq!(waiting["status"], "queued");
    assert!(acme.events(&second, "task.claimed").await.is_empty());

    // The next day the stopped task resumes where it stopped and finishes.
    clock.set(at("2026-12-08T00:00:01Z"));
    let done = acme.finished(&first).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(acme.events(&first, "task.claimed").await.len(), 2);
    let total = acme.charged(&first).await;
    assert_eq!(done["result"]["spend"]["cost"].as_u64(), Some(total));
    assert!(total > CAP, "one run costs more than a day allows");

    // `second` runs on the second day until it too stops for the day's end. Every day stays
    // within the cap; the days together are what acme's tasks were charged.
    let second_released = acme.until_events(&second, "task.released", 1).await;
    assert_eq!(second_released[0]["not_before"], "2026-12-09T00:00:00Z");
    let second_cost = acme.charged(&second).await;
    let days = acme.days().await;
    assert!(days.values().all(|&cost| cost <= CAP), "{days:?}");
    assert_eq!(days.values().sum::<u64>(), total + second_cost, "{days:?}");
    assert_eq!(days["2026-12-07T00:00:00Z"], day_one);
    stack.stop().await;
}

#[tokio::test]
async fn a_tenant_over_its_daily_cap_is_refused_and_its_tasks_wait_for_the_next_day() {
    over_the_daily_cap(false).await;
}

#[tokio::test]
async fn a_tenant_over_its_daily_cap_is_refused_and_its_tasks_wait_for_the_next_day_on_postgres() {
    over_the_daily_cap(true).await;
}

#[tokio::test]
async fn an_uncapped_tenant_sees_its_spend_per_day() {
    let stack = Stack::start_setup(
        "worked_example.json",
        Setup {
            settings: priced(),
            ..Setup::default()
        },
    )
    .await;
    let id = stack.submit(GOAL, "auto", 400_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let (_, stats) = stack.get("/v1/stats").await;
    let spend = &stats["spend"];
    assert_eq!(spend["cap"], Value::Null, "{spend:#}");
    let periods = spend["periods"].as_array().expect("periods");
    assert_eq!(periods.len(), 7, "this day and the six before it");
    assert_eq!(
        periods[0]["cost"].as_u64(),
        task["result"]["spend"]["cost"].as_u64()
    );
    assert!(periods[1..].iter().all(|p| p["cost"] == 0));
    stack.stop().await;
}
