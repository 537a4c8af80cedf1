//! `?kinds=` on a task's events: only events of the kinds named, each an exact kind
//! (`step.finished`) or a family (`ledger`, every `ledger.*`). A name that is neither is a 400
//! listing the known ones, so a typo is never an empty stream. The terminal event is always
//! delivered, so a filtered stream still ends and a poller still learns the task ended.

use crate::domain::event::kinds;
use crate::http::error::ApiError;

/// What `?kinds=` admits; the default admits everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindFilter {
    /// `None`: no filter.
    names: Option<Vec<&'static str>>,
}

/// The families: each kind's part before the dot, in catalog order, without repeats.
pub fn families() -> Vec<&'static str> {
    let mut families: Vec<&'static str> = Vec::new();
    for kind in kinds::ALL {
        let family = kind.split('.').next().unwrap_or(kind);
        if !families.contains(&family) {
            families.push(family);
        }
    }
    families
}

impl KindFilter {
    /// Parses `?kinds=`: comma-separated names, each a kind or a family.
    pub fn parse(text: Option<&str>) -> Result<KindFilter, ApiError> {
        let Some(text) = text else {
            return Ok(KindFilter::default());
        };
        let families = families();
        let mut names = Vec::new();
        let mut unknown = Vec::new();
        for item in text.split(',').map(str::trim) {
            let known = kinds::ALL
                .iter()
                .chain(families.iter())
                .find(|name| **name == item);
            match known {
                Some(name) => names.push(*name),
                None => unknown.push(format!("{item:?}")),
            }
        }
        if !unknown.is_empty() {
            return Err(ApiError::InvalidParameter(format!(
                "kinds names {} that is neither an event kind nor a family; the families are {} \
                 and the kinds are listed in docs/api.md (Events)",
                unknown.join(", "),
                families.join(", ")
            )));
        }
        Ok(KindFilter { names: Some(names) })
    }

    /// No filter: every event is delivered.
    pub fn is_all(&self) -> bool {
        self.names.is_none()
    }

    /// Whether an event of `kind` is delivered.
    pub fn admits(&self, kind: &str) -> bool {
        let Some(names) = &self.names else {
            return true;
        };
        kinds::is_terminal(kind)
            || names.iter().any(|name| {
                kind == *name
                    || kind
                        .strip_prefix(name)
                        .is_some_and(|rest| rest.starts_with('.'))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_families_filter_and_the_end_always_passes() {
        let filter = KindFilter::parse(Some("ledger,step.finished")).expect("known names");
        assert!(filter.admits("ledger.charge") && filter.admits("step.finished"));
        assert!(!filter.admits("milestone.started") && !filter.admits("ledgers.x"));
        assert!(
            filter.admits("task.succeeded"),
            "the terminal event always passes"
        );
        assert!(
            KindFilter::parse(None)
                .expect("no filter")
                .admits("anything")
        );
    }

    #[test]
    fn an_unknown_name_is_refused_in_plain_words() {
        let error = KindFilter::parse(Some("step.finished,stepz")).expect_err("a typo");
        let text = error.to_string();
        assert!(
            text.contains("\"stepz\"") && text.contains("ledger"),
            "{text}"
        );
        assert!(KindFilter::parse(Some("")).is_err(), "an empty name");
        assert!(families().contains(&"milestone") && families().contains(&"v1"));
    }
}
