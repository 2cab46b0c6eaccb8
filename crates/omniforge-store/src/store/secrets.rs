//! [`SecretStore`]: secrets encrypted at rest, the grants that give one tool version a secret,
//! and key rotation.

use std::collections::HashMap;

use async_trait::async_trait;

use super::tools::ToolStore;
use crate::error::StoreError;
use crate::model::{Actor, Grant, SecretInfo, SecretRequest, SecretValue};

/// Secrets and their grants (issues 11 and 14).
///
/// **At rest** every value is sealed with the store's [`Keyring`](crate::Keyring)
/// (XChaCha20-Poly1305, bound to the secret's name): the database holds no plain value and no
/// key. A store opened without a keyring keeps names, grants and deletions working, and answers
/// [`StoreError::NoSecretKey`] to everything that would read or write a value. A value sealed
/// under a key the keyring lacks is [`StoreError::SecretKeyMissing`]; one that was altered or
/// copied from another secret's row is [`StoreError::SecretUnreadable`].
///
/// **Grants**: a run of a tool version gets a secret only if an admin granted that secret to
/// that exact version ([`grant_secret`](SecretStore::grant_secret)); the store only records
/// who may; the server decides who is admin. A version's declared `secrets` without a grant are
/// pending requests ([`secret_requests`](SecretStore::secret_requests)). A new version starts
/// without grants; a rollback uses the target version's own. Deleting a secret deletes its
/// grants; purging a tool deletes its versions' grants. Pack imports make none.
#[async_trait]
pub trait SecretStore: ToolStore {
    /// Sets a secret, replacing any previous value, sealed under the keyring's current key.
    /// Its grants are kept.
    ///
    /// Audit: `set` of the secret, with `created` and `key_id` in the detail (never the value).
    /// A change (`secret`).
    ///
    /// # Errors
    /// [`StoreError::InvalidName`]; [`StoreError::NoSecretKey`]; [`StoreError::Invalid`]
    /// (actor); [`StoreError::Crypto`]; [`StoreError::Database`].
    async fn set_secret(&self, actor: &Actor, name: &str, value: &str) -> Result<(), StoreError>;

    /// Deletes a secret and every grant of it.
    ///
    /// Audit: `delete` of the secret, with `grants_removed` (tool and version of each) in the
    /// detail. Changes: `secret`, and `grant` for each tool that lost a grant.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Invalid`] (actor), [`StoreError::Database`].
    async fn delete_secret(&self, actor: &Actor, name: &str) -> Result<(), StoreError>;

    /// The names of all secrets, sorted; never their values.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn secret_names(&self) -> Result<Vec<String>, StoreError>;

    /// The names of all secrets with when each was last set and the key that seals it, sorted
    /// by name; never values.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn secrets(&self) -> Result<Vec<SecretInfo>, StoreError>;

    /// The values a run of `tool` version `version` may have, in one read: each secret the
    /// version declares and an admin granted to it. Empty for a version that is not live
    /// (pending, draft or rejected versions get no secrets, whatever their grants) and for one
    /// that declares none (then no key is needed either). Which declared secrets are left out,
    /// and why, is [`secret_requests`](SecretStore::secret_requests).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) if the version does not exist;
    /// [`StoreError::NoSecretKey`], [`StoreError::SecretKeyMissing`],
    /// [`StoreError::SecretUnreadable`], [`StoreError::Database`].
    async fn granted_secrets(
        &self,
        tool: &str,
        version: u32,
    ) -> Result<HashMap<String, SecretValue>, StoreError>;

    /// Each secret version `version` of `tool` declares, in declaration order: whether it is
    /// set, and its grant if it has one (`None`: a pending request).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set); [`StoreError::Corrupt`],
    /// [`StoreError::Database`].
    async fn secret_requests(
        &self,
        tool: &str,
        version: u32,
    ) -> Result<Vec<SecretRequest>, StoreError>;

    /// Grants secret `secret` to version `version` of `tool`, which must declare it. Returns
    /// `false`, changing nothing (no record, no change), if that grant exists already.
    ///
    /// Audit: `grant` of the tool, with the version and `secret` in the detail. A change
    /// (`grant`, keyed by the tool).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] for a missing secret, tool or version;
    /// [`StoreError::Invalid`] if the version does not declare the secret, or for the actor;
    /// [`StoreError::Database`].
    async fn grant_secret(
        &self,
        actor: &Actor,
        secret: &str,
        tool: &str,
        version: u32,
    ) -> Result<bool, StoreError>;

    /// Revokes a grant.
    ///
    /// Audit: `revoke` of the tool, with the version and `secret`. A change (`grant`).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (kind [`Grant`](crate::NameKind::Grant)) if there is no such
    /// grant; [`StoreError::Invalid`] (actor); [`StoreError::Database`].
    async fn revoke_secret(
        &self,
        actor: &Actor,
        secret: &str,
        tool: &str,
        version: u32,
    ) -> Result<(), StoreError>;

    /// Grants, of one secret and/or one tool (all grants when both are `None`), by secret, tool
    /// and version.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn grants(
        &self,
        secret: Option<&str>,
        tool: Option<&str>,
    ) -> Result<Vec<Grant>, StoreError>;

    /// Re-encrypts every secret under the keyring's current key in one transaction, so that
    /// older keys can then be removed from the key file. Returns how many values were sealed
    /// again (values already under the current key are left alone). Not a change of the feed:
    /// no value changes.
    ///
    /// Audit: `rotate_key` of the keyring (named by the current key id), with `resealed` and
    /// `from_keys` in the detail.
    ///
    /// # Errors
    /// [`StoreError::NoSecretKey`]; [`StoreError::SecretKeyMissing`] or
    /// [`StoreError::SecretUnreadable`] for a value that cannot be opened (then nothing is
    /// re-encrypted); [`StoreError::Invalid`] (actor); [`StoreError::Crypto`];
    /// [`StoreError::Database`].
    async fn rotate_key(&self, actor: &Actor) -> Result<u64, StoreError>;
}
