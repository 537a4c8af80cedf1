//! API keys and stream tokens (mirrors `postgres/keys.rs`). Secrets are never stored: rows hold
//! the SHA-256 of a key's secret and of a stream token.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::rows::{from_millis, id_text, millis, parse_id};
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

fn key_from_row(row: &SqliteRow) -> Result<StoredApiKey, StoreError> {
    let scopes: String = row.try_get("scopes")?;
    let revoked: Option<i64> = row.try_get("revoked_at")?;
    let key = ApiKey {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        scopes: parse_scopes(&scopes)
            .map_err(|error| StoreError::Corrupt(format!("api key scopes: {error}")))?,
        name: row.try_get("name")?,
        created_at: from_millis(row.try_get("created_at")?)?,
        revoked_at: revoked.map(from_millis).transpose()?,
    };
    Ok(StoredApiKey {
        key,
        secret_hash: row.try_get("secret_hash")?,
    })
}

impl SqliteStore {
    pub(super) async fn insert_api_key(
        &self,
        new: NewApiKey,
        now: DateTime<Utc>,
    ) -> Result<ApiKey, StoreError> {
        let mut tx = self.write().await?;
        let row = sqlx::query(concat!(
            "INSERT INTO api_keys (id, tenant_id, scopes, name, secret_hash, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING ",
            key_columns!()
        ))
        .bind(&new.id)
        .bind(&new.tenant_id)
        .bind(scopes_text(&new.scopes))
        .bind(&new.name)
        .bind(&new.secret_hash)
        .bind(millis(now))
        .fetch_one(&mut *tx)
        .await?;
        let stored = key_from_row(&row)?;
        tx.commit().await?;
        Ok(stored.key)
    }

    pub(super) async fn api_key_row(&self, id: &str) -> Result<Option<StoredApiKey>, StoreError> {
        sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM api_keys WHERE id = ?1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(key_from_row)
        .transpose()
    }

    pub(super) async fn api_key_rows(&self) -> Result<Vec<ApiKey>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM api_keys ORDER BY created_at, id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| key_from_row(row).map(|stored| stored.key))
            .collect()
    }

    pub(super) async fn revoke_api_key_tx(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiKey>, StoreError> {
        let mut tx = self.write().await?;
        let row = sqlx::query(concat!(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1 \
             RETURNING ",
            key_columns!()
        ))
        .bind(id)
        .bind(millis(now))
        .fetch_optional(&mut *tx)
        .await?;
        let key = row.as_ref().map(key_from_row).transpose()?;
        tx.commit().await?;
        Ok(key.map(|stored| stored.key))
    }

    pub(super) async fn any_api_key(&self) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT EXISTS (SELECT 1 FROM api_keys) AS present")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("present")? != 0)
    }

    pub(super) async fn insert_stream_token(
        &self,
        token: NewStreamToken,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM stream_tokens WHERE expires_at < ?1")
            .bind(millis(now))
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO stream_tokens (token_hash, task_id, tenant_id, key_id, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .bind(&token.token_hash)
        .bind(id_text(token.task_id))
        .bind(&token.tenant_id)
        .bind(&token.key_id)
        .bind(millis(token.expires_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn stream_token_row(
        &self,
        token_hash: &str,
    ) -> Result<Option<StreamToken>, StoreError> {
        let row = sqlx::query(
            "SELECT task_id, tenant_id, key_id, expires_at FROM stream_tokens \
             WHERE token_hash = ?1",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let task_id: String = row.try_get("task_id")?;
        Ok(Some(StreamToken {
            task_id: parse_id(&task_id)?,
            tenant_id: row.try_get("tenant_id")?,
            key_id: row.try_get("key_id")?,
            expires_at: from_millis(row.try_get("expires_at")?)?,
        }))
    }
}
