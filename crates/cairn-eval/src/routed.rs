//! A live evaluation with only some kinds of call sent to the real model (`cairn eval --live
//! --live-purposes strategic`): the others are answered by the world's policy at once.
//!
//! What it is for: reading one kind of answer of the real model on every task of a suite in
//! minutes instead of hours. At temperature 0 a call's answer depends only on its prompt and
//! input, and the first call of a kind in a run (v2's first plan, say) is asked the same
//! whatever answers the rest of the run, so such a run records the plans the real model
//! writes for every task (`scripts/live-plans.py` reads them from the store) at the cost of
//! one plan each. Its verified figures are of a mixed model and are labelled so in the
//! report's model name; a run log of it cannot be resumed as a wholly live one.

use std::sync::Arc;

use async_trait::async_trait;

use super::error::EvalError;
use super::world::World;
use cairn::engine::runtime::ports::{ModelCall, ModelPort, ModelReply, PortError, Purpose};

/// Sends the calls of `live_for` to `live`, the rest to the world's policy.
pub struct Routed {
    pub live: Arc<dyn ModelPort>,
    pub world: Arc<World>,
    pub live_for: Vec<Purpose>,
}

#[async_trait]
impl ModelPort for Routed {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        if self.live_for.contains(&call.purpose) {
            self.live.complete(call).await
        } else {
            self.world.complete(call).await
        }
    }
}

/// `gate,strategic,...`: the purposes named, each once, in the order given.
pub fn parse_purposes(list: &str) -> Result<Vec<Purpose>, EvalError> {
    let mut purposes = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let purpose = [
            Purpose::Gate,
            Purpose::Strategic,
            Purpose::Tactical,
            Purpose::Verifier,
        ]
        .into_iter()
        .find(|p| p.as_str() == name)
        .ok_or_else(|| EvalError::Purpose(name.to_string()))?;
        if !purposes.contains(&purpose) {
            purposes.push(purpose);
        }
    }
    if purposes.is_empty() {
        return Err(EvalError::Purpose(list.to_string()));
    }
    Ok(purposes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_parse_by_name_and_anything_else_is_refused() {
        assert_eq!(
            parse_purposes("strategic, gate,strategic").unwrap(),
            [Purpose::Strategic, Purpose::Gate]
        );
        assert!(matches!(parse_purposes("planner"), Err(EvalError::Purpose(p)) if p == "planner"));
        assert!(parse_purposes(" , ").is_err());
    }
}
