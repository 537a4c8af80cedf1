//! API keys and stream tokens (mirrors `sqlite/keys.rs`). Secrets are never stored: rows hold
//! the SHA-256 of a key's secret and of a stream token.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};

use crate::store::StoreError;
use crate::store::keys::{
    ApiKey, NewApiKey, NewStreamToken, StoredApiKey, StreamToken, parse_scopes, scopes_text,
};

/// The columns [`key_from_row`] reads, for `concat!`.
macro_rules! key_columns {
    () => {
        "id, tenant_id, scopes, name, secret_hash, created_at, revoked_at"
    };
}

fn key_from_row(row: &PgRow) -> Result<StoredApiKey, StoreError> {
    let scopes: String = row.try_get("scopes")?;
    let key = ApiKey {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        scopes: parse_scopes(&scopes)
            .map_err(|error| StoreError::Corrupt(format!("api key scopes: {error}")))?,
        name: row.try_get("name")?,
        created_at: row.try_get("created_at")?,
        revoked_at: row.try_get("revoked_at")?,
    };
    Ok(StoredApiKey {
        key,
        secret_hash: row.try_get("secret_hash")?,
    })
}

pub(super) async fn insert(
    pool: &PgPool,
    new: NewApiKey,
    now: DateTime<Utc>,
) -> Result<ApiKey, StoreError> {
    let row = sqlx::query(concat!(
        "INSERT INTO api_keys (id, tenant_id, scopes, name, secret_hash, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING ",
        key_columns!()
    ))
    .bind(&new.id)
    .bind(&new.tenant_id)
    .bind(scopes_text(&new.scopes))
    .bind(&new.name)
    .bind(&new.secret_hash)
    .bind(now)
    .fetch_one(pool)
    .await?;
    Ok(key_from_row(&row)?.key)
}

pub(super) async fn get(pool: &PgPool, id: &str) -> Result<Option<StoredApiKey>, StoreError> {
    sqlx::query(concat!(
        "SELECT ",
        key_columns!(),
        " FROM api_keys WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(key_from_row)
    .transpose()
}

pub(super) async fn list(pool: &PgPool) -> Result<Vec<ApiKey>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        key_columns!(),
        " FROM api_keys ORDER BY created_at, id"
    ))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| key_from_row(row).map(|stored| stored.key))
        .collect()
}

pub(super) async fn revoke(
    pool: &PgPool,
    id: &str,
    now: DateTime<Utc>,
) -> Result<Option<ApiKey>, StoreError> {
    let row = sqlx::query(concat!(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING ",
        key_columns!()
    ))
    .bind(id)
    .bind(now)
    .fetch_optional(pool)
    .await?;
    Ok(row
        .as_ref()
        .map(key_from_row)
        .transpose()?
        .map(|stored| stored.key))
}

pub(super) async fn any(pool: &PgPool) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT EXISTS (SELECT 1 FROM api_keys) AS present")
        .fetch_one(pool)
        .await?;
    Ok(row.try_get("present")?)
}

pub(super) async fn insert_stream_token(
    pool: &PgPool,
    token: NewStreamToken,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("DELETE FROM stream_tokens WHERE expires_at < $1")
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO stream_tokens (token_hash, task_id, tenant_id, key_id, expires_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&token.token_hash)
    .bind(token.task_id)
    .bind(&token.tenant_id)
    .bind(&token.key_id)
    .bind(token.expires_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn stream_token(
    pool: &PgPool,
    token_hash: &str,
) -> Result<Option<StreamToken>, StoreError> {
    let row = sqlx::query(
        "SELECT task_id, tenant_id, key_id, expires_at FROM stream_tokens WHERE token_hash = $1",
    )
    .bind(token_hash)
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(StreamToken {
        task_id: row.try_get("task_id")?,
        tenant_id: row.try_get("tenant_id")?,
        key_id: row.try_get("key_id")?,
        expires_at: row.try_get("expires_at")?,
    }))
}
