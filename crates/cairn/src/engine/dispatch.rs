//! The one dispatch: strategy x rollout arm x shadow -> engine. `cairn serve`, `cairn eval`
//! and shadow runs all send tasks through it, so a strategy means the same engine everywhere.
//!
//! - `one_shot`, `reactive`, `v1` run on the [`baselines`](super::baselines); `v2` and
//!   `direct` on [`V2Engine`] (`direct` forces the gate's direct route); `auto` on the arm the
//!   [`Rollout`] gives it: a resumed task goes back to the engine its checkpoint is tagged with
//!   ([`EngineKind::of_checkpoint`]), whatever the percentage says now.
//! - Shadow copies (metadata [`SHADOW_OF`]) run on a second set of engines, built over the
//!   sandboxed tools; there `auto` always means the gate and v2.
//! - The test-only minimal engine is reachable only when the composition root installs it
//!   ([`Dispatch::with_test_engine`], from an operator switch the lifecycle tests set); a
//!   client's metadata alone never selects it.

use std::sync::Arc;

use async_trait::async_trait;

use super::baselines::{BaselineConfig, OneShotEngine, Ports, ReactiveEngine, V1Engine};
use super::minimal::META_STEPS;
use super::planner::V2Engine;
use super::rollout::{Arm, Rollout};
use super::runtime::checkpoint::EngineKind;
use super::runtime::ports::{ModelPort, ToolPort};
use super::{Engine, EngineError, RunContext, RunOutcome};
use crate::domain::settings::EngineSettings;
use crate::domain::task::{SHADOW_OF, Strategy};

/// Every strategy's engine over one set of ports.
pub struct Engines {
    v2: V2Engine,
    one_shot: OneShotEngine,
    reactive: ReactiveEngine,
    v1: V1Engine,
}

impl Engines {
    pub fn new(
        models: Arc<dyn ModelPort>,
        tools: Arc<dyn ToolPort>,
        settings: EngineSettings,
        baselines: BaselineConfig,
    ) -> Engines {
        let ports = Ports {
            models: models.clone(),
            tools: tools.clone(),
            config: baselines,
            validators: Default::default(),
            approval: settings.approval.clone(),
            prices: settings.prices.clone(),
            spend_caps: settings.spend_caps.clone(),
        };
        Engines {
            v2: V2Engine::new(models, tools, settings),
            one_shot: OneShotEngine::new(ports.clone()),
            reactive: ReactiveEngine::new(ports.clone()),
            v1: V1Engine::new(ports),
        }
    }

    fn pick(&self, strategy: Strategy, arm: impl FnOnce() -> Arm) -> &dyn Engine {
        match strategy {
            Strategy::OneShot => &self.one_shot,
            Strategy::Reactive => &self.reactive,
            Strategy::V1 => &self.v1,
            Strategy::V2 | Strategy::Direct => &self.v2,
            Strategy::Auto => match arm() {
                Arm::V1 => &self.v1,
                Arm::V2 => &self.v2,
            },
        }
    }
}

/// See the module docs.
pub struct Dispatch {
    real: Engines,
    shadow: Engines,
    rollout: Arc<Rollout>,
    test_engine: Option<Arc<dyn Engine>>,
}

impl Dispatch {
    /// `real` serves ordinary tasks, `shadow` the shadow copies; `rollout` splits `auto`.
    pub fn new(real: Engines, shadow: Engines, rollout: Arc<Rollout>) -> Dispatch {
        Dispatch {
            real,
            shadow,
            rollout,
            test_engine: None,
        }
    }

    /// Sends tasks carrying the minimal engine's tuning metadata to `engine` (tests only).
    pub fn with_test_engine(mut self, engine: Arc<dyn Engine>) -> Dispatch {
        self.test_engine = Some(engine);
        self
    }

    fn pick(&self, ctx: &RunContext) -> &dyn Engine {
        if let Some(test) = &self.test_engine
            && ctx.task.metadata.get(META_STEPS).is_some()
            && !matches!(ctx.task.strategy, Strategy::V2 | Strategy::Direct)
        {
            return test.as_ref();
        }
        if ctx.task.metadata.get(SHADOW_OF).is_some() {
            return self.shadow.pick(ctx.task.strategy, || Arm::V2);
        }
        let resumed = match EngineKind::of_checkpoint(ctx.state.as_ref()) {
            Some(EngineKind::V1) => Some(Arm::V1),
            Some(EngineKind::V2) => Some(Arm::V2),
            _ => None,
        };
        self.real.pick(ctx.task.strategy, || {
            self.rollout.route(ctx.task.id, resumed)
        })
    }
}

#[async_trait]
impl Engine for Dispatch {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        self.pick(&ctx).run(ctx).await
    }
}
