//! Store methods only tests call, behind the `test-support` feature: crates enable it as a
//! dev-dependency feature, so no build of the server or CLI has them. Each bypasses something
//! the public traits keep (`secret_values` reads secrets without a grant; `record_call` writes
//! one call-log row outside a batch) or reads what no caller needs.

use std::collections::HashMap;

use super::calls::record_batch;
use super::changes::counter;
use super::content::{fetch_row, template_from_row, template_select};
use super::exec::q;
use super::rows::{not_found, now_ms};
use super::secrets::open_row;
use super::tasks::{REPLICA_RESTARTED, fail_where};
use super::{Engine, Lock};
use crate::error::{NameKind, StoreError};
use crate::model::{CallRecord, SecretValue, StoredTemplate};

impl Engine {
    /// The change counter as an `i64`: the same number as
    /// [`current_seq`](crate::ToolStore::current_seq).
    ///
    /// # Errors
    /// [`StoreError::Database`].
    pub async fn data_version(&self) -> Result<i64, StoreError> {
        counter(&mut *self.db.read().await?).await
    }

    /// Moves the expiry of an unexpired output to `expires_at_ms` if that is later (a task that
    /// outlives the output's TTL keeps it as long as itself); never shortens it. Returns the
    /// expiry in force afterwards.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (kind [`Output`](crate::NameKind::Output)) for an unknown or
    /// expired id; [`StoreError::Database`].
    pub async fn extend_output_expiry(
        &self,
        run_id: &str,
        expires_at_ms: i64,
    ) -> Result<i64, StoreError> {
        let core = self;
        let mut w = core.write_with(Lock::None).await?;
        let expiry: Option<i64> = q("UPDATE kept_output SET expires_at_ms = CASE \
             WHEN $1 > expires_at_ms THEN $1 ELSE expires_at_ms END \
             WHERE run_id = $2 AND expires_at_ms > $3 RETURNING expires_at_ms")
        .bind(expires_at_ms)
        .bind(run_id)
        .bind(now_ms())
        .scalar_opt(w.conn())
        .await?;
        let expiry = expiry.ok_or_else(|| not_found(NameKind::Output, run_id))?;
        w.commit().await?;
        Ok(expiry)
    }

    /// Fails every unfinished task `replica` holds (it restarted: whatever ran them is gone);
    /// returns their ids.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    pub async fn fail_replica_tasks(&self, replica: &str) -> Result<Vec<String>, StoreError> {
        let core = self;
        let mut w = core.write().await?;
        let ids = fail_where(
            &mut w,
            "UPDATE task SET status = 'failed', error = $1, updated_at_ms = $2, \
             status_message = $3, input_requests = NULL, input_responses = '{}' \
             WHERE status IN ('working', 'input_required') AND replica = $4 RETURNING task_id",
            REPLICA_RESTARTED,
            Some(replica),
        )
        .await?;
        w.commit().await?;
        Ok(ids)
    }

    /// One resource template, enabled or not.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    pub async fn get_template(
        &self,
        uri_template: &str,
    ) -> Result<Option<StoredTemplate>, StoreError> {
        let sql = concat!(template_select!(), " WHERE uri_template = $1");
        fetch_row(
            &mut *self.db.read().await?,
            sql,
            uri_template,
            template_from_row,
        )
        .await
    }

    /// Appends a finished call to the log and to its hour, pruning the oldest rows and hours in
    /// the same transaction. Texts longer than their limit are cut:
    /// [`error`](CallRecord::error) to [`MAX_CALL_ERROR_BYTES`](crate::MAX_CALL_ERROR_BYTES),
    /// [`arguments_text`](CallRecord::arguments_text) and [`result_text`](CallRecord::result_text)
    /// to [`MAX_CALL_TEXT_BYTES`](crate::MAX_CALL_TEXT_BYTES) (their `total_bytes` keep the
    /// whole length). With `call_log_max_rows` 0 only the hour is counted.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) for a [`Stored`](crate::CallSource::Stored) call
    /// whose version does not exist (for example, the tool was purged while the call ran);
    /// [`StoreError::Invalid`] if a count exceeds `i64::MAX`, the version is missing for a
    /// stored call or given for another source, the tool name is empty or longer than
    /// [`MAX_CALL_TOOL_BYTES`](crate::MAX_CALL_TOOL_BYTES), or the arguments digest is not 64
    /// lowercase hex digits; [`StoreError::Database`].
    pub async fn record_call(&self, call: CallRecord) -> Result<(), StoreError> {
        match record_batch(self, vec![call]).await?.pop() {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// The values of the named secrets that exist, **whatever the grants**; a name with no
    /// secret is simply absent from the map.
    ///
    /// Runs get theirs through [`granted_secrets`](crate::SecretStore::granted_secrets); this
    /// is for tests that check what is stored.
    ///
    /// # Errors
    /// [`StoreError::NoSecretKey`], [`StoreError::SecretKeyMissing`],
    /// [`StoreError::SecretUnreadable`], [`StoreError::Database`].
    pub async fn secret_values(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, SecretValue>, StoreError> {
        let core = self;
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        let mut tx = core.db.snapshot().await?;
        let mut values = HashMap::new();
        for name in names {
            let row = q("SELECT name, value, sealed, key_id FROM secret WHERE name = $1")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(mut row) = row {
                let (name, value) = open_row(core, &mut row)?;
                values.insert(name, value);
            }
        }
        Ok(values)
    }
}
