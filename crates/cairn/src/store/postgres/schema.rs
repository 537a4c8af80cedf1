//! The Postgres migrations, compiled into the binary.
//!
//! A container image ships only the executable, so the SQL files are embedded with
//! `include_str!` rather than read from `migrations/postgres/` at run time (and without sqlx's
//! `macros` feature, which would slow every build). sqlx records each applied version with its
//! checksum and takes an advisory lock, so replicas starting together migrate once.

use sqlx::migrate::Migrator;

use crate::store::migrations::{self, Embedded};

/// `(version, description, sql)`, in order. Append new files here; never edit an applied one.
const MIGRATIONS: Embedded = &[
    (
        1,
        "initial",
        include_str!("../../../../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "api keys",
        include_str!("../../../../../migrations/postgres/0002_api_keys.sql"),
    ),
    (
        3,
        "running tasks per tenant",
        include_str!("../../../../../migrations/postgres/0003_running_per_tenant.sql"),
    ),
    (
        4,
        "lz4 checkpoints",
        include_str!("../../../../../migrations/postgres/0004_lz4_checkpoints.sql"),
    ),
    (
        5,
        "checkpoint as text",
        include_str!("../../../../../migrations/postgres/0005_checkpoint_text.sql"),
    ),
    (
        6,
        "fewer indexes",
        include_str!("../../../../../migrations/postgres/0006_fewer_indexes.sql"),
    ),
    (
        7,
        "event payloads as text",
        include_str!("../../../../../migrations/postgres/0007_event_text.sql"),
    ),
    (
        8,
        "a task's tools",
        include_str!("../../../../../migrations/postgres/0008_task_tools.sql"),
    ),
    (
        9,
        "messages to a task",
        include_str!("../../../../../migrations/postgres/0009_task_messages.sql"),
    ),
    (
        10,
        "approvals",
        include_str!("../../../../../migrations/postgres/0010_approvals.sql"),
    ),
    (
        11,
        "money as a budget unit",
        include_str!("../../../../../migrations/postgres/0011_money.sql"),
    ),
    (
        12,
        "per-tenant spend caps",
        include_str!("../../../../../migrations/postgres/0012_spend_caps.sql"),
    ),
];

pub(super) fn migrator() -> Migrator {
    migrations::migrator(MIGRATIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_unique_and_increasing() {
        let versions: Vec<i64> = MIGRATIONS.iter().map(|(version, _, _)| *version).collect();
        assert!(versions.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(migrator().iter().count(), MIGRATIONS.len());
    }
}
