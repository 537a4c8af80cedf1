//! The SQLite migrations, compiled into the binary (sqlx's `migrate!` macro is not available),
//! so `cairn serve` can create its file on a fresh machine from the executable alone.

use sqlx::migrate::Migrator;

use crate::store::migrations::{self, Embedded};

/// `(version, description, sql)`, in order. Append new files here; never edit an applied one.
const MIGRATIONS: Embedded = &[
    (
        1,
        "initial",
        include_str!("../../../../../migrations/sqlite/0001_initial.sql"),
    ),
    (
        2,
        "api keys",
        include_str!("../../../../../migrations/sqlite/0002_api_keys.sql"),
    ),
    (
        3,
        "running tasks per tenant",
        include_str!("../../../../../migrations/sqlite/0003_running_per_tenant.sql"),
    ),
    (
        4,
        "a task's tools",
        include_str!("../../../../../migrations/sqlite/0004_task_tools.sql"),
    ),
    (
        5,
        "messages to a task",
        include_str!("../../../../../migrations/sqlite/0005_task_messages.sql"),
    ),
    (
        6,
        "approvals",
        include_str!("../../../../../migrations/sqlite/0006_approvals.sql"),
    ),
    (
        7,
        "money as a budget unit",
        include_str!("../../../../../migrations/sqlite/0007_money.sql"),
    ),
    (
        8,
        "per-tenant spend caps",
        include_str!("../../../../../migrations/sqlite/0008_spend_caps.sql"),
    ),
];

pub(super) fn migrator() -> Migrator {
    migrations::migrator(MIGRATIONS)
}
