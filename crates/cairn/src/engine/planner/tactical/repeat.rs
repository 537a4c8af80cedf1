//! A repair that proposes a list which already failed: what it is told, and the escalation when
//! its one narrowed re-ask gives nothing usable.

use serde_json::json;

use super::{Planned, offer};
use crate::domain::event::kinds::STEPS_REFUSED;
use crate::domain::plan::fingerprint::Fingerprint;
use crate::domain::repair::{ProposalVerdict, RepairLevel, RepairLimits, rung_name};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::Record;

/// Escalates on a repeated proposal whose narrowed re-ask gave nothing usable, as the ladder
/// would have on the repeat itself.
pub(super) async fn escalate_repeat(
    cx: &Attempt,
    milestone_id: &str,
    level: RepairLevel,
    fingerprint: Fingerprint,
    limits: &RepairLimits,
) -> Result<Planned, Halt> {
    let (_, planned) = cx
        .journal
        .record(|state| {
            let to = match state
                .ladder
                .propose(milestone_id, level, fingerprint.clone(), limits)
            {
                ProposalVerdict::Escalate { to } => Some(to),
                _ => None,
            };
            let record = Record::event(
                STEPS_REFUSED,
                json!({"milestone": milestone_id, "repeated_fingerprint": fingerprint.0,
                       "level": level, "escalate_to": rung_name(to), "narrowed": true}),
            );
            Ok((
                record,
                Planned::Repeated {
                    fingerprint: fingerprint.0.clone(),
                    to,
                },
            ))
        })
        .await?;
    Ok(planned)
}

/// What a repair proposing a failed list again is told.
pub(super) fn repeat_refusal(fingerprint: Option<Fingerprint>, offered: &offer::Offer) -> String {
    let mut said = format!(
        "this step list repeats one that already failed (fingerprint {}); it is not run \
         again: write a different list",
        fingerprint.map(|f| f.0).unwrap_or_default()
    );
    if offered.narrowable {
        said.push_str(&format!(
            "; not offered now: {} (failed here, or a read while the change is still to make)",
            offered.failing.join(", ")
        ));
    }
    said
}
