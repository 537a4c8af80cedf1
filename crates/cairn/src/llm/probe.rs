//! A cheap reachability probe of the configured model endpoints, for `/readyz`.
//!
//! Each distinct base URL is asked `GET {base}/v1/models` once, with a short timeout and no
//! credentials. Any HTTP answer below 500 (a 401 or 404 included) means the server is there;
//! a refused connection, a timeout or a 5xx (llama.cpp answers 503 while it loads the model)
//! means it is not. Reasons name neither the URL nor the key.

use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;

use super::{LlmClient, Purpose};

/// One model endpoint that did not answer the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeFailure {
    /// Every purpose served by that endpoint.
    pub purposes: Vec<Purpose>,
    /// Why, without the URL or the key: `could not connect`, `no answer within 2s`, `HTTP 503`.
    pub reason: String,
}

/// Something `/readyz` can ask whether the model endpoints are reachable.
#[async_trait]
pub trait ModelProbe: Send + Sync {
    /// The endpoints that did not answer; empty when all did.
    async fn unreachable(&self) -> Vec<ProbeFailure>;
}

/// An [`LlmClient`] probed with a fixed timeout per endpoint.
#[derive(Debug, Clone)]
pub struct EndpointProbe {
    pub client: LlmClient,
    pub timeout: Duration,
}

#[async_trait]
impl ModelProbe for EndpointProbe {
    async fn unreachable(&self) -> Vec<ProbeFailure> {
        self.client.probe(self.timeout).await
    }
}

impl LlmClient {
    /// Probes each distinct base URL once, concurrently (see the module docs).
    pub async fn probe(&self, timeout: Duration) -> Vec<ProbeFailure> {
        let mut groups: Vec<(String, Vec<Purpose>)> = Vec::new();
        for purpose in Purpose::ALL {
            let Some(endpoint) = self.endpoint(purpose) else {
                continue;
            };
            let base = endpoint.base_url.trim_end_matches('/').to_string();
            match groups.iter_mut().find(|(known, _)| *known == base) {
                Some((_, purposes)) => purposes.push(purpose),
                None => groups.push((base, vec![purpose])),
            }
        }
        let probes = groups.iter().map(|(base, _)| self.probe_one(base, timeout));
        let outcomes = join_all(probes).await;
        groups
            .into_iter()
            .zip(outcomes)
            .filter_map(|((_, purposes), outcome)| {
                outcome
                    .err()
                    .map(|reason| ProbeFailure { purposes, reason })
            })
            .collect()
    }

    async fn probe_one(&self, base: &str, timeout: Duration) -> Result<(), String> {
        let request = self
            .http()
            .get(format!("{base}/v1/models"))
            .timeout(timeout)
            .send();
        let outcome = match tokio::time::timeout(timeout, request).await {
            Ok(outcome) => outcome,
            Err(_) => return Err(format!("no answer within {timeout:?}")),
        };
        match outcome {
            Ok(response) if response.status().is_server_error() => {
                Err(format!("HTTP {}", response.status().as_u16()))
            }
            Ok(_) => Ok(()),
            Err(error) if error.is_connect() => Err("could not connect".into()),
            Err(error) if error.is_timeout() => Err(format!("no answer within {timeout:?}")),
            Err(_) => Err("the request failed".into()),
        }
    }
}
