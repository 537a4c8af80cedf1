//! Embedded migrations, shared by both backends' `schema.rs`.
//!
//! A container image ships only the executable, so each backend embeds its SQL files with
//! `include_str!` as a `(version, description, sql)` list; this turns such a list into a sqlx
//! [`Migrator`] (without sqlx's `macros` feature, which would slow every build).

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// `(version, description, sql)`, in order.
pub(super) type Embedded = &'static [(i64, &'static str, &'static str)];

pub(super) fn migrator(migrations: Embedded) -> Migrator {
    Migrator::with_migrations(
        migrations
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}
