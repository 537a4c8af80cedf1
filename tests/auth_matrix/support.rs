//! The fixture of the auth matrix: a real `cairn::http::serve` with authentication required,
//! on a store holding keys of two tenants, a task of tenant `acme` with a plan version, a
//! ledger entry and an artifact, and a request recipe for every route.

use std::sync::Arc;

use cairn::clock::{Clock, ManualClock};
use cairn::domain::approval::ApprovalKind;
use cairn::http::AppState;
use cairn::http::auth::AuthMode;
use cairn::store::ClaimParams;
use cairn::store::approvals::{Park, Parked};
use cairn::store::keys::{Scope, generate_key};
use cairn::store::{Change, NewArtifact, NewLedgerEntry, NewPlanVersion, Store};
use chrono::Utc;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The digest of every parked fixture task's request.
pub const DIGEST: &str = "d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1";

/// Marks every value of tenant `acme`; no answer to another tenant may contain it.
pub const ACME_MARK: &str = "acme-private-7f3a";

pub struct Keys {
    pub acme_all: String,
    pub acme_all_id: String,
    pub acme_read: String,
    pub acme_submit: String,
    pub acme_admin: String,
    pub acme_approve: String,
    pub beta_all: String,
    pub revoked: String,
}

pub struct Fixture {
    pub base: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    pub clock: Arc<ManualClock>,
    pub keys: Keys,
    /// A task of `acme` with history.
    pub task: uuid::Uuid,
    stop: Option<oneshot::Sender<()>>,
}

async fn key(
    store: &Arc<dyn Store>,
    tenant: &str,
    scopes: &[Scope],
    now: chrono::DateTime<Utc>,
) -> (String, String) {
    let generated =
        generate_key(tenant, scopes.to_vec(), Some(format!("{tenant} test"))).expect("key");
    let id = generated.new.id.clone();
    store
        .create_api_key(generated.new, now)
        .await
        .expect("store key");
    (generated.token.expose().to_string(), id)
}

impl Fixture {
    pub async fn start(store: Arc<dyn Store>) -> Fixture {
        let clock = Arc::new(ManualClock::new(cairn::clock::SystemClock.now()));
        let now = clock.now();
        let all = [Scope::Read, Scope::Submit, Scope::Admin];
        let (acme_all, acme_all_id) = key(&store, "acme", &all, now).await;
        let (revoked, revoked_id) = key(&store, "acme", &all, now).await;
        store
            .revoke_api_key(&revoked_id, now)
            .await
            .expect("revoke");
        let keys = Keys {
            acme_all,
            acme_all_id,
            acme_read: key(&store, "acme", &[Scope::Read], now).await.0,
            acme_submit: key(&store, "acme", &[Scope::Submit], now).await.0,
            acme_admin: key(&store, "acme", &[Scope::Admin], now).await.0,
            acme_approve: key(&store, "acme", &[Scope::Approve], now).await.0,
            beta_all: key(&store, "beta", &all, now).await.0,
            revoked,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let state = AppState::new(
            store.clone(),
            clock.clone(),
            cairn::config::Config::default(),
        )
        .with_auth(AuthMode::Required);
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(cairn::http::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        let mut fixture = Fixture {
            base,
            client: reqwest::Client::new(),
            store,
            clock,
            keys,
            task: uuid::Uuid::nil(),
            stop: Some(stop),
        };
        fixture.task = fixture.task_with_history().await;
        fixture
    }

    /// A task of `acme`, created through the API, with a plan version, a ledger entry and an
    /// artifact written by a worker.
    async fn task_with_history(&self) -> uuid::Uuid {
        let task = self.new_acme_task().await;
        let claimed = self
            .store
            .claim(ClaimParams::new(
                "matrix-worker",
                self.clock.now(),
                chrono::Duration::minutes(5),
            ))
            .await
            .expect("claim")
            .expect("queued task");
        assert_eq!(claimed.task.id, task);
        let change = Change {
            plan_version: Some(NewPlanVersion {
                version: 1,
                reason: "initial".into(),
                caused_by_seq: None,
                plan: json!({"milestones": [], "note": ACME_MARK}),
            }),
            ledger: vec![NewLedgerEntry {
                milestone_id: None,
                kind: "allocate".into(),
                unit: "tokens".into(),
                amount: 100,
            }],
            artifacts: vec![NewArtifact {
                milestone_id: "m1".into(),
                name: "report".into(),
                value: json!(ACME_MARK),
            }],
            ..Change::default()
        };
        self.store
            .commit(&claimed.lease, change, self.clock.now())
            .await
            .expect("commit");
        task
    }

    /// A fresh task of `acme` waiting on approval request 1, whose digest is [`DIGEST`] (a
    /// decision can be taken once: every case decides its own).
    pub async fn parked_acme_task(&self) -> uuid::Uuid {
        let task = self.new_acme_task().await;
        // Claims are oldest first: other cases' queued tasks are claimed on the way, and handed
        // back as they were once this one is parked.
        let mut others = Vec::new();
        let claimed = loop {
            let claimed = self
                .store
                .claim(ClaimParams::new(
                    "matrix-worker",
                    self.clock.now(),
                    chrono::Duration::minutes(5),
                ))
                .await
                .expect("claim")
                .expect("queued task");
            if claimed.task.id == task {
                break claimed;
            }
            others.push(claimed);
        };
        let park = Park {
            kind: ApprovalKind::Steps,
            digest: DIGEST.into(),
            request: json!({"calls": [{"tool": "deploy", "args": {"note": ACME_MARK}}]}),
            expires_at: None,
        };
        let parked = self
            .store
            .park(&claimed.lease, park, self.clock.now())
            .await
            .expect("park");
        assert_eq!(parked, Parked::Waiting { approval: 1 });
        for other in others {
            let release = Change {
                release: true,
                ..Change::default()
            };
            self.store
                .commit(&other.lease, release, self.clock.now())
                .await
                .expect("release");
        }
        task
    }

    /// A fresh queued task of `acme` (for routes that change it).
    pub async fn new_acme_task(&self) -> uuid::Uuid {
        let response = self
            .send(
                "POST",
                "/v1/tasks",
                Some(&self.keys.acme_all),
                Some(task_body(ACME_MARK)),
            )
            .await;
        assert_eq!(response.status(), 202);
        let task: Value = response.json().await.expect("task");
        task["id"].as_str().expect("id").parse().expect("uuid")
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> reqwest::Response {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("accept", "application/json");
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.expect("request")
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub fn task_body(goal: &str) -> Value {
    json!({
        "goal": goal,
        "budget": {"tokens": 10_000, "tool_calls": 20, "wall_ms": 60_000},
    })
}

/// How to call one route of the OpenAPI document against `task`: the concrete path and the
/// body. A route without a recipe fails the matrix (as does one without an access rule).
pub fn recipe(method: &str, path: &str, task: uuid::Uuid, goal: &str) -> (String, Option<Value>) {
    let concrete = path
        .replace("{id}", &task.to_string())
        .replace("{version}", "1")
        .replace("{approval}", "1");
    let body = match (method, path) {
        ("POST", "/v1/tasks") => Some(task_body(goal)),
        ("POST", "/v1/tasks/{id}/shadow") => Some(json!({"strategy": "v1"})),
        ("POST", "/v1/tasks/{id}/messages") => Some(json!({"text": "use the EU region"})),
        ("POST", "/v1/tasks/{id}/approvals/{approval}") => {
            Some(json!({"decision": "approve", "digest": DIGEST}))
        }
        ("PUT", "/v1/rollout") => Some(json!({"percent": 0})),
        ("POST", "/v1/tasks/{id}/cancel" | "/v1/tasks/{id}/stream-token" | "/v1/tools/refresh") => {
            None
        }
        ("GET", _) => None,
        _ => panic!("no recipe for {method} {path}: add one (and an access rule)"),
    };
    (concrete, body)
}

/// Every operation of the OpenAPI document, as (method, path).
pub fn operations() -> Vec<(String, String)> {
    let document = serde_json::to_value(cairn::http::openapi()).expect("document");
    let mut out = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in ["get", "put", "post", "delete", "patch"] {
            if item.get(method).is_some() {
                out.push((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// Status and body of one call.
pub async fn call(
    f: &Fixture,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (u16, String, reqwest::header::HeaderMap) {
    let response = f.send(method, path, key, body).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, response.text().await.expect("body"), headers)
}

pub fn problem_type(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    value["type"].as_str().unwrap_or_default().to_string()
}
