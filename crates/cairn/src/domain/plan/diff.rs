//! The structural difference between two plan versions.
//!
//! Every repair writes a new plan version with its reason; the diff answers "what did that
//! repair change?" without a reader comparing two JSON documents by eye. Milestones are matched
//! by id, so a reordered list is not reported as a rewrite, and each changed milestone lists only
//! the fields that differ, with their before and after values.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::error::PlanError;
use super::{Milestone, Plan};

/// One field of one milestone, before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FieldChange {
    pub field: String,
    #[schema(value_type = Object)]
    pub before: Value,
    #[schema(value_type = Object)]
    pub after: Value,
}

/// A milestone present in both versions whose fields differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MilestoneChange {
    pub id: String,
    pub changes: Vec<FieldChange>,
}

/// What changed from one plan version to the next. Lists follow the new plan's order (removed
/// milestones follow the old plan's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlanDiff {
    /// Milestones only the new version has, in full.
    pub added: Vec<Milestone>,
    /// Ids of milestones only the old version has.
    pub removed: Vec<String>,
    pub changed: Vec<MilestoneChange>,
    /// Ids of milestones identical in both.
    pub unchanged: Vec<String>,
    /// True when the milestones both versions share appear in a different order.
    pub reordered: bool,
}

impl PlanDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && !self.reordered
    }
}

/// Compares two plans milestone by milestone (matched by id).
pub fn diff(old: &Plan, new: &Plan) -> PlanDiff {
    let before: BTreeMap<&str, &Milestone> =
        old.milestones.iter().map(|m| (m.id.as_str(), m)).collect();
    let after_ids: BTreeSet<&str> = new.milestones.iter().map(|m| m.id.as_str()).collect();
    let mut out = PlanDiff {
        added: Vec::new(),
        removed: old
            .milestones
            .iter()
            .filter(|m| !after_ids.contains(m.id.as_str()))
            .map(|m| m.id.clone())
            .collect(),
        changed: Vec::new(),
        unchanged: Vec::new(),
        reordered: false,
    };
    for m in &new.milestones {
        match before.get(m.id.as_str()) {
            None => out.added.push(m.clone()),
            Some(old_m) => {
                let changes = field_changes(old_m, m);
                if changes.is_empty() {
                    out.unchanged.push(m.id.clone());
                } else {
                    out.changed.push(MilestoneChange {
                        id: m.id.clone(),
                        changes,
                    });
                }
            }
        }
    }
    let shared_old: Vec<&str> = old
        .milestones
        .iter()
        .map(|m| m.id.as_str())
        .filter(|id| after_ids.contains(id))
        .collect();
    let shared_new: Vec<&str> = new
        .milestones
        .iter()
        .map(|m| m.id.as_str())
        .filter(|id| before.contains_key(id))
        .collect();
    out.reordered = shared_old != shared_new;
    out
}

/// Parses two stored plan bodies (extra keys such as a ledger summary are ignored) and diffs
/// them.
pub fn diff_values(old: &Value, new: &Value) -> Result<PlanDiff, Vec<PlanError>> {
    Ok(diff(
        &Plan::from_value(old, 10)?,
        &Plan::from_value(new, 10)?,
    ))
}

fn field_changes(old: &Milestone, new: &Milestone) -> Vec<FieldChange> {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return Vec::new();
    };
    // Field order of the wire shape, so changes read in a familiar order.
    let mut fields: Vec<&String> = a.keys().collect();
    fields.extend(b.keys().filter(|k| !a.contains_key(*k)));
    fields
        .into_iter()
        .filter(|f| f.as_str() != "id")
        .filter_map(|f| {
            let before = a.get(f).cloned().unwrap_or(Value::Null);
            let after = b.get(f).cloned().unwrap_or(Value::Null);
            (before != after).then(|| FieldChange {
                field: f.clone(),
                before,
                after,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::MilestoneStatus;
    use serde_json::json;

    fn v1() -> Value {
        json!({"milestones": [
            {"id": "m1", "title": "Find usages", "effort": 1, "tools": ["search"],
             "accept": {"type": "artifact", "name": "usage_list"}, "status": "done"},
            {"id": "m2", "title": "Patch A", "depends_on": ["m1"], "effort": 2, "tools": ["edit_file"],
             "accept": {"type": "command", "tool": "run", "exit_code": 0}},
            {"id": "m4", "title": "Patch C", "depends_on": ["m1"], "effort": 2, "tools": ["edit_file"],
             "accept": {"type": "command", "tool": "run", "exit_code": 0}}
        ], "ledger": {"tokens": 1}, "artifacts": {"m1": ["usage_list"]}})
    }

    #[test]
    fn identical_versions_have_an_empty_diff() {
        let d = diff_values(&v1(), &v1()).unwrap();
        assert!(d.is_empty());
        assert_eq!(d.unchanged, vec!["m1", "m2", "m4"]);
    }

    #[test]
    fn additions_removals_and_field_changes_are_listed() {
        let old = Plan::from_value(&v1(), 10).unwrap();
        let mut new = old.clone();
        new.milestones.retain(|m| m.id != "m4");
        let m2 = new.milestone_mut("m2").unwrap();
        m2.effort = 3;
        m2.status = MilestoneStatus::Active;
        let mut m5 = old.milestones[2].clone();
        m5.id = "m5".into();
        m5.title = "Patch C and its shell script".into();
        new.milestones.push(m5.clone());
        let d = diff(&old, &new);
        assert_eq!(d.added, vec![m5]);
        assert_eq!(d.removed, vec!["m4"]);
        assert_eq!(d.unchanged, vec!["m1"]);
        assert!(!d.reordered);
        assert_eq!(
            d.changed,
            vec![MilestoneChange {
                id: "m2".into(),
                changes: vec![
                    FieldChange {
                        field: "effort".into(),
                        before: json!(2),
                        after: json!(3)
                    },
                    FieldChange {
                        field: "status".into(),
                        before: json!("pending"),
                        after: json!("active")
                    },
                ],
            }]
        );
        let text = serde_json::to_value(&d).unwrap();
        assert_eq!(text["changed"][0]["changes"][0]["field"], "effort");
    }

    #[test]
    fn steps_appearing_and_reordering_are_reported() {
        let old = Plan::from_value(&v1(), 10).unwrap();
        let mut new = old.clone();
        new.milestones.swap(1, 2);
        new.milestones[2].steps =
            serde_json::from_value(json!([{"id": "m2.s1", "tool": "edit_file"}])).unwrap();
        let d = diff(&old, &new);
        assert!(d.reordered);
        assert_eq!(d.changed.len(), 1);
        let change = &d.changed[0].changes[0];
        assert_eq!(
            (change.field.as_str(), &change.before),
            ("steps", &Value::Null)
        );
        assert_eq!(change.after[0]["id"], "m2.s1");
    }

    #[test]
    fn unreadable_versions_are_refused() {
        assert!(diff_values(&json!({"nope": 1}), &v1()).is_err());
    }
}
