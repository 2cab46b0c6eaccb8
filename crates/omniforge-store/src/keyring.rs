//! The secret keyring: keys that encrypt secret values at rest, and the key file they live in.
//! Backend-neutral: every backend seals and opens values through [`Keyring`], and stores only
//! what it returns (a key id and sealed bytes).
//!
//! # Encryption
//! XChaCha20-Poly1305 (RustCrypto `chacha20poly1305`), a 256-bit key, a random 192-bit nonce per
//! value (random nonces of this size never collide in practice, so a key needs no counter).
//! The associated data binds the sealed bytes to the key id and the secret's name, so a value
//! copied to another secret's row, or relabelled with another key id, fails to open instead of
//! revealing itself under the wrong name. Sealed bytes are `1 ‖ nonce (24) ‖ ciphertext ‖ tag
//! (16)`; the leading format byte leaves room for another scheme later.
//!
//! # Key file
//! UTF-8 text, one key per line: `ID BASE64KEY`, separated by spaces or tabs. `ID` is 1 to 64
//! characters from `[A-Za-z0-9_.-]`; `BASE64KEY` is standard base64 (with padding) of exactly
//! 32 random bytes. Blank lines and lines starting with `#` are ignored. The **first** key
//! encrypts every new value; every key opens the values stored under its id, so a new key can be
//! rolled in without a stop (see *Rolling a new key in* below).
//! Duplicate ids are refused. The file must not be readable or writable by group or others
//! (mode `0600` or stricter), like an SSH private key. [`Keyring::generate_file`] writes a new
//! file with one key and mode `0600`; [`Keyring::add_key_to_file`] puts a new key first.
//!
//! ```text
//! # OmniForge secret keyring. The first key encrypts new values.
//! k1733011200-5c0ffee1 0mJ0y4B3PqW6hZm6cL0y2b8m1S8pZk3VqQ3X7bq6a5Q=
//! ```
//!
//! # Rolling a new key in
//! A keyring [loaded](Keyring::load) from a file follows that file while it runs, so running
//! replicas take a new key without a restart. Before sealing a value, and when it meets a value
//! sealed under a key id it does not hold, it compares the file's size, modification time and
//! inode with those it loaded and, only when they differ, reads the file again (a `stat` per
//! such event; a read only per change of the file, so a value under a key no file holds cannot
//! make a replica read the file per call). A changed file that fails to load (wrong mode, bad
//! line) leaves the keys in use as they were, with a warning. So the rolling procedure is:
//! put the new key first in every replica's file ([`Keyring::add_key_to_file`], then copy the
//! file), then [`SecretStore::rotate_key`](crate::SecretStore::rotate_key) once; an old key may
//! leave the files after that.
//!
//! The key never enters the database: a backup of the store holds sealed values only. Keep the
//! key file apart from backups.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::Aead as _;
use chacha20poly1305::{KeyInit as _, XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

use crate::error::StoreError;
use crate::model::SecretValue;

/// Bytes of one key: 32 (256 bits).
pub const KEY_BYTES: usize = 32;

/// The longest key id, in characters.
pub const MAX_KEY_ID_LEN: usize = 64;

/// The format byte that starts every sealed value.
const FORMAT_V1: u8 = 1;

/// Bytes of an XChaCha20 nonce.
const NONCE_BYTES: usize = 24;

/// Bytes of a Poly1305 tag.
const TAG_BYTES: usize = 16;

/// A key file could not be read, written or understood.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyringError {
    /// Reading or writing the file failed.
    #[error("secret key file {}: {source}", path.display())]
    Io {
        /// The key file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line of the file breaks the format (see the [module docs](self)).
    #[error("secret key file {}, line {line}: {reason}", path.display())]
    Format {
        /// The key file (empty for [`Keyring::parse`]).
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, never the key itself.
        reason: String,
    },
    /// The file holds no key.
    #[error("secret key file {} holds no key", path.display())]
    Empty {
        /// The key file (empty for [`Keyring::parse`]).
        path: PathBuf,
    },
    /// Group or others may read or write the file.
    #[error(
        "secret key file {} has mode {mode:o}: group and others must have no access (chmod 600)",
        path.display()
    )]
    Permissions {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The operating system's random source failed while making a key.
    #[error("generating a secret key: {reason}")]
    Random {
        /// The cause.
        reason: String,
    },
}

/// One key of the ring.
struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

/// One key of a key file as raw bytes, with its id (wiped on drop).
pub type KeyMaterial = (String, Zeroizing<[u8; KEY_BYTES]>);

/// A set of keys with ids; the first one encrypts new values. Cheap to clone (shared: a clone
/// sees the keys its original reloads from the file).
///
/// Its `Debug` shows the key ids only.
#[derive(Clone)]
pub struct Keyring {
    shared: Arc<Shared>,
}

/// The keys of a [`Keyring`] and the file they follow.
struct Shared {
    keys: RwLock<Arc<[Key]>>,
    /// The key file, for a keyring [loaded](Keyring::load) from one.
    file: Option<Followed>,
}

/// The key file a keyring follows, and what the file looked like when last read.
struct Followed {
    path: PathBuf,
    stamp: Mutex<Option<Stamp>>,
}

/// What tells one version of a key file from another without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        })
    }
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("key_ids", &self.key_ids())
            .finish()
    }
}

/// A value sealed under a key: what a backend stores beside the secret's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sealed {
    /// The id of the key that sealed it.
    pub(crate) key_id: String,
    /// `1 ‖ nonce ‖ ciphertext ‖ tag`.
    pub(crate) bytes: Vec<u8>,
}

impl Keyring {
    /// A keyring of `keys` (id, 32-byte key), the first one current.
    ///
    /// # Errors
    /// [`KeyringError::Empty`] without keys; [`KeyringError::Format`] (line = position, from 1)
    /// for a bad or repeated id.
    pub fn from_keys(keys: Vec<(String, [u8; KEY_BYTES])>) -> Result<Keyring, KeyringError> {
        let mut ring = Vec::with_capacity(keys.len());
        for (i, (id, bytes)) in keys.into_iter().enumerate() {
            let bytes = Zeroizing::new(bytes);
            add_key(&mut ring, Path::new(""), i + 1, id, &bytes[..])?;
        }
        Keyring::from_vec(ring, Path::new(""))
    }

    /// Parses key file text (see the [module docs](self)).
    ///
    /// # Errors
    /// [`KeyringError::Format`] naming the first bad line, [`KeyringError::Empty`].
    pub fn parse(text: &str) -> Result<Keyring, KeyringError> {
        Keyring::parse_for(text, Path::new(""))
    }

    fn parse_for(text: &str, path: &Path) -> Result<Keyring, KeyringError> {
        let mut ring = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let format = |reason: &str| KeyringError::Format {
                path: path.to_owned(),
                line: i + 1,
                reason: reason.to_owned(),
            };
            let mut fields = line.split_ascii_whitespace();
            let (Some(id), Some(key), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(format("expected two fields: ID BASE64KEY"));
            };
            let bytes = Zeroizing::new(
                BASE64
                    .decode(key)
                    .map_err(|_| format("the key is not standard base64"))?,
            );
            add_key(&mut ring, path, i + 1, id.to_owned(), &bytes)?;
        }
        Keyring::from_vec(ring, path)
    }

    fn from_vec(ring: Vec<Key>, path: &Path) -> Result<Keyring, KeyringError> {
        if ring.is_empty() {
            return Err(KeyringError::Empty {
                path: path.to_owned(),
            });
        }
        Ok(Keyring {
            shared: Arc::new(Shared {
                keys: RwLock::new(ring.into()),
                file: None,
            }),
        })
    }

    /// The keys in use (a snapshot: a reload replaces them, never changes them in place).
    fn keys(&self) -> Arc<[Key]> {
        self.shared
            .keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reads the key file again if it changed since it was last read (see *Rolling a new key
    /// in* in the [module docs](self)); whether the keys changed. A keyring not loaded from a
    /// file never changes. A changed file that fails to load keeps the keys as they were (a
    /// warning says why) and is not read again until it changes again.
    pub fn refresh(&self) -> bool {
        let Some(file) = &self.shared.file else {
            return false;
        };
        let mut stamp = file.stamp.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Stamp::of(&file.path);
        if now.is_none() || *stamp == now {
            return false;
        }
        *stamp = now;
        match Keyring::load_keys(&file.path) {
            Ok(keys) => {
                let ids: Vec<&str> = keys.iter().map(|k| k.id.as_str()).collect();
                tracing::info!(path = %file.path.display(), key_ids = ?ids, "reloaded the secret key file");
                *self
                    .shared
                    .keys
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = keys;
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the secret key file changed but cannot be loaded; keeping the keys in use");
                false
            }
        }
    }

    /// Reads a key file. On Unix the file must not be accessible to group or others.
    ///
    /// # Errors
    /// [`KeyringError::Io`], [`KeyringError::Permissions`], and as [`parse`](Keyring::parse).
    pub fn load(path: &Path) -> Result<Keyring, KeyringError> {
        // The stamp first: a change between it and the read is seen by the next refresh.
        let stamp = Stamp::of(path);
        let keys = Keyring::load_keys(path)?;
        Ok(Keyring {
            shared: Arc::new(Shared {
                keys: RwLock::new(keys),
                file: Some(Followed {
                    path: path.to_owned(),
                    stamp: Mutex::new(stamp),
                }),
            }),
        })
    }

    /// The keys of the key file at `path`, checked as [`load`](Keyring::load) says.
    fn load_keys(path: &Path) -> Result<Arc<[Key]>, KeyringError> {
        let io = |source| KeyringError::Io {
            path: path.to_owned(),
            source,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(KeyringError::Permissions {
                    path: path.to_owned(),
                    mode,
                });
            }
        }
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(io)?);
        Ok(Keyring::parse_for(&text, path)?.keys())
    }

    /// Creates a new key file at `path` holding one fresh random key, with mode `0600`, and
    /// returns its keyring. Fails if the file exists (never overwrites a key). The file appears
    /// whole or not at all (written beside it, then linked into place), so a process that
    /// starts at the same moment reads either nothing or the complete key.
    ///
    /// # Errors
    /// [`KeyringError::Io`] (also when `path` exists), [`KeyringError::Random`].
    pub fn generate_file(path: &Path) -> Result<Keyring, KeyringError> {
        let io = |source| KeyringError::Io {
            path: path.to_owned(),
            source,
        };
        let (id, line) = new_key_line()?;
        let text = Zeroizing::new(format!("{HEADER}{line}\n"));
        let tmp = path.with_extension(format!("new-{}-{id}", std::process::id()));
        write_new_private(&tmp, &text).map_err(io)?;
        // `hard_link` fails if `path` exists: no key is ever overwritten, and no reader sees a
        // half-written file. A file system without hard links gets the file written in place.
        let linked = match std::fs::hard_link(&tmp, path) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                write_new_private(path, &text)
            }
            other => other,
        };
        let _ = std::fs::remove_file(&tmp);
        linked.map_err(io)?;
        let ring = Keyring::load(path)?;
        tracing::info!(path = %path.display(), key_id = %id, "generated a new secret key file");
        Ok(ring)
    }

    /// Reads the key file at `path`, or creates it with one new key if it does not exist: the
    /// embedded default, where the key lives in the data directory beside the database.
    ///
    /// # Errors
    /// As [`load`](Keyring::load) and [`generate_file`](Keyring::generate_file).
    pub fn load_or_generate(path: &Path) -> Result<Keyring, KeyringError> {
        match Keyring::generate_file(path) {
            Err(KeyringError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                Keyring::load(path)
            }
            other => other,
        }
    }

    /// The raw keys of the key file at `path`, in file order (the first one current), for other
    /// uses of the same file format: the request-state keyring of input-required results
    /// (`--request-state-key-file`) signs with them. Checked exactly as [`load`](Keyring::load).
    ///
    /// # Errors
    /// As [`load`](Keyring::load).
    pub fn load_key_material(path: &Path) -> Result<Vec<KeyMaterial>, KeyringError> {
        // Permissions, format, key sizes and duplicate ids are checked here.
        Keyring::load(path)?;
        let text =
            Zeroizing::new(
                std::fs::read_to_string(path).map_err(|source| KeyringError::Io {
                    path: path.to_owned(),
                    source,
                })?,
            );
        let mut keys = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_ascii_whitespace();
            if let (Some(id), Some(key)) = (fields.next(), fields.next()) {
                let bytes = Zeroizing::new(BASE64.decode(key).unwrap_or_default());
                let mut key = Zeroizing::new([0u8; KEY_BYTES]);
                if bytes.len() == KEY_BYTES {
                    key.copy_from_slice(&bytes);
                    keys.push((id.to_owned(), key));
                }
            }
        }
        Ok(keys)
    }

    /// Puts a new random key first in the key file at `path` (the other keys stay, in order, so
    /// values sealed under them stay readable) and returns its id. The file is replaced
    /// atomically (a `0600` temporary file renamed over it). Reload the keyring and call
    /// [`SecretStore::rotate_key`](crate::SecretStore::rotate_key) to re-encrypt old values.
    ///
    /// # Errors
    /// As [`load`](Keyring::load); [`KeyringError::Io`] if the new file cannot be written.
    pub fn add_key_to_file(path: &Path) -> Result<String, KeyringError> {
        let io = |source| KeyringError::Io {
            path: path.to_owned(),
            source,
        };
        Keyring::load(path)?;
        let old = Zeroizing::new(std::fs::read_to_string(path).map_err(io)?);
        let (id, line) = new_key_line()?;
        // The new key goes before the first key line, after any leading comments.
        let mut text = Zeroizing::new(String::with_capacity(old.len() + line.len() + 1));
        let mut placed = false;
        for l in old.lines() {
            let t = l.trim();
            if !placed && !t.is_empty() && !t.starts_with('#') {
                text.push_str(&line);
                text.push('\n');
                placed = true;
            }
            text.push_str(l);
            text.push('\n');
        }
        Keyring::parse_for(&text, path)?;
        let tmp = path.with_extension(format!("new-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        write_new_private(&tmp, &text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })?;
        Ok(id)
    }

    /// The id of the key that encrypts new values (the first).
    pub fn current_key_id(&self) -> String {
        // `from_vec` refuses an empty ring.
        self.keys()
            .first()
            .map_or_else(String::new, |k| k.id.clone())
    }

    /// Every key id, the current one first.
    pub fn key_ids(&self) -> Vec<String> {
        self.keys().iter().map(|k| k.id.clone()).collect()
    }

    /// Whether the ring holds a key with this id.
    pub fn contains(&self, key_id: &str) -> bool {
        self.keys().iter().any(|k| k.id == key_id)
    }

    /// Seals `value` of secret `name` under the current key, with a fresh random nonce.
    ///
    /// # Errors
    /// [`StoreError::Crypto`] if the random source fails.
    pub(crate) fn seal(&self, name: &str, value: &str) -> Result<Sealed, StoreError> {
        // A key put first in the file since it was read seals from now on.
        self.refresh();
        let keys = self.keys();
        let key = keys.first().ok_or(StoreError::NoSecretKey)?;
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|e| StoreError::Crypto {
            reason: format!("random source: {e}"),
        })?;
        let aad = associated_data(&key.id, name);
        let sealed = key
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                chacha20poly1305::aead::Payload {
                    msg: value.as_bytes(),
                    aad: &aad,
                },
            )
            .map_err(|_| StoreError::Crypto {
                reason: "value too long to encrypt".into(),
            })?;
        let mut bytes = Vec::with_capacity(1 + NONCE_BYTES + sealed.len());
        bytes.push(FORMAT_V1);
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&sealed);
        Ok(Sealed {
            key_id: key.id.clone(),
            bytes,
        })
    }

    /// Opens the value of secret `name` sealed under `key_id`.
    ///
    /// # Errors
    /// [`StoreError::SecretKeyMissing`] if the ring has no such key;
    /// [`StoreError::SecretUnreadable`] if the bytes were altered, belong to another secret or
    /// key id, or are not valid UTF-8.
    pub(crate) fn open(
        &self,
        name: &str,
        key_id: &str,
        bytes: &[u8],
    ) -> Result<SecretValue, StoreError> {
        let mut keys = self.keys();
        if !keys.iter().any(|k| k.id == key_id) && self.refresh() {
            // Sealed under a key added to the file since it was read (a rotation).
            keys = self.keys();
        }
        let key =
            keys.iter()
                .find(|k| k.id == key_id)
                .ok_or_else(|| StoreError::SecretKeyMissing {
                    name: name.to_owned(),
                    key_id: key_id.to_owned(),
                })?;
        let unreadable = || StoreError::SecretUnreadable {
            name: name.to_owned(),
        };
        if bytes.len() < 1 + NONCE_BYTES + TAG_BYTES || bytes[0] != FORMAT_V1 {
            return Err(unreadable());
        }
        let (nonce, sealed) = bytes[1..].split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| unreadable())?;
        let aad = associated_data(key_id, name);
        let plain = key
            .cipher
            .decrypt(
                &XNonce::from(nonce),
                chacha20poly1305::aead::Payload {
                    msg: sealed,
                    aad: &aad,
                },
            )
            .map_err(|_| unreadable())?;
        String::from_utf8(plain)
            .map(SecretValue::new)
            .map_err(|_| unreadable())
    }
}

/// The first lines of a generated key file.
const HEADER: &str = "# OmniForge secret keyring: one key per line, \"ID BASE64KEY\".\n\
                      # The first key encrypts new values; every key opens values stored under its id.\n";

/// What the AEAD authenticates besides the value: the scheme, the key id and the secret name.
fn associated_data(key_id: &str, name: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(24 + key_id.len() + name.len());
    aad.extend_from_slice(b"omniforge secret v1\0");
    aad.extend_from_slice(key_id.as_bytes());
    aad.push(0);
    aad.extend_from_slice(name.as_bytes());
    aad
}

/// Checks and adds one key to `ring`.
fn add_key(
    ring: &mut Vec<Key>,
    path: &Path,
    line: usize,
    id: String,
    bytes: &[u8],
) -> Result<(), KeyringError> {
    let format = |reason: String| KeyringError::Format {
        path: path.to_owned(),
        line,
        reason,
    };
    let id_ok = (1..=MAX_KEY_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !id_ok {
        return Err(format(format!(
            "key id {id:?}: expected 1 to {MAX_KEY_ID_LEN} characters from [A-Za-z0-9_.-]"
        )));
    }
    if ring.iter().any(|k| k.id == id) {
        return Err(format(format!("key id {id:?} appears twice")));
    }
    if bytes.len() != KEY_BYTES {
        return Err(format(format!(
            "key {id:?} is {} bytes; expected {KEY_BYTES}",
            bytes.len()
        )));
    }
    let cipher = XChaCha20Poly1305::new_from_slice(bytes)
        .map_err(|_| format(format!("key {id:?} has the wrong length")))?;
    ring.push(Key { id, cipher });
    Ok(())
}

/// A new random key as a key file line, and its id: `k<unix seconds>-<8 hex digits>`.
fn new_key_line() -> Result<(String, String), KeyringError> {
    let random = |e: getrandom::Error| KeyringError::Random {
        reason: e.to_string(),
    };
    let mut key = Zeroizing::new([0u8; KEY_BYTES]);
    getrandom::fill(&mut key[..]).map_err(random)?;
    let mut tag = [0u8; 4];
    getrandom::fill(&mut tag).map_err(random)?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let id = format!("k{secs}-{:08x}", u32::from_be_bytes(tag));
    let line = format!("{id} {}", BASE64.encode(&key[..]));
    Ok((id, line))
}

/// Writes `text` to a new file (failing if it exists) with mode 0600, synced.
fn write_new_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(ids: &[&str]) -> Keyring {
        Keyring::from_keys(
            ids.iter()
                .enumerate()
                .map(|(i, id)| (id.to_string(), [i as u8 + 1; KEY_BYTES]))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn seal_and_open_round_trip_with_fresh_nonces() {
        let r = ring(&["a", "b"]);
        let one = r.seal("TOKEN", "hunter2 ünï").unwrap();
        let two = r.seal("TOKEN", "hunter2 ünï").unwrap();
        assert_eq!(one.key_id, "a");
        assert_ne!(one.bytes, two.bytes, "a fresh nonce per value");
        assert!(!one.bytes.windows(7).any(|w| w == b"hunter2"));
        let value = r.open("TOKEN", &one.key_id, &one.bytes).unwrap();
        assert_eq!(value.expose(), "hunter2 ünï");
    }

    #[test]
    fn tampering_renaming_and_relabelling_fail() {
        let r = ring(&["a", "b"]);
        let sealed = r.seal("TOKEN", "v").unwrap();
        for i in 0..sealed.bytes.len() {
            let mut bad = sealed.bytes.clone();
            bad[i] ^= 1;
            assert!(matches!(
                r.open("TOKEN", "a", &bad),
                Err(StoreError::SecretUnreadable { .. })
            ));
        }
        assert!(matches!(
            r.open("OTHER", "a", &sealed.bytes),
            Err(StoreError::SecretUnreadable { .. })
        ));
        assert!(matches!(
            r.open("TOKEN", "b", &sealed.bytes),
            Err(StoreError::SecretUnreadable { .. })
        ));
        assert!(matches!(
            r.open("TOKEN", "zzz", &sealed.bytes),
            Err(StoreError::SecretKeyMissing { .. })
        ));
        assert!(matches!(
            r.open("TOKEN", "a", &sealed.bytes[..10]),
            Err(StoreError::SecretUnreadable { .. })
        ));
    }

    #[test]
    fn key_file_format() {
        let k1 = BASE64.encode([7u8; 32]);
        let k2 = BASE64.encode([8u8; 32]);
        let r = Keyring::parse(&format!("# c\n\n new\t{k1} \nold {k2}\n")).unwrap();
        assert_eq!(r.key_ids(), ["new", "old"]);
        assert_eq!(r.current_key_id(), "new");
        assert!(!format!("{r:?}").contains(&k1));
        // Each case: the text and the line the error names.
        let short = BASE64.encode([1u8; 16]);
        let cases = [
            (format!("a {k1}\nb"), 2),
            (format!("a {k1} extra"), 1),
            (format!("a {short}"), 1),
            ("a not*base64".to_owned(), 1),
            (format!("a {k1}\na {k2}"), 2),
            (format!("bad/id {k1}"), 1),
            (format!("{} {k1}", "x".repeat(65)), 1),
        ];
        for (text, line) in cases {
            match Keyring::parse(&text) {
                Err(KeyringError::Format {
                    line: l, reason, ..
                }) => {
                    assert_eq!(l, line, "{text}: {reason}");
                    assert!(!reason.contains(&k1) && !reason.contains(&k2), "{reason}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            Keyring::parse("# only a comment\n"),
            Err(KeyringError::Empty { .. })
        ));
    }

    #[test]
    fn processes_starting_together_share_one_generated_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.key");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || Keyring::load_or_generate(&path).unwrap())
            })
            .collect();
        let ids: Vec<String> = threads
            .into_iter()
            .map(|t| t.join().unwrap().current_key_id().to_owned())
            .collect();
        assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }

    /// The request-state keyring reads the same file: the raw keys in file order, checked as
    /// `load` checks them (a file others may read is refused).
    #[cfg(unix)]
    #[test]
    fn key_material_is_the_files_keys_in_order() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("request-state.key");
        let a = BASE64.encode([1u8; KEY_BYTES]);
        let b = BASE64.encode([2u8; KEY_BYTES]);
        std::fs::write(&path, format!("# ring\nk2 {b}\n\nk1 {a}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let keys = Keyring::load_key_material(&path).unwrap();
        let ids: Vec<&str> = keys.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["k2", "k1"]);
        assert_eq!(*keys[0].1, [2u8; KEY_BYTES]);
        assert_eq!(*keys[1].1, [1u8; KEY_BYTES]);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            Keyring::load_key_material(&path),
            Err(KeyringError::Permissions { .. })
        ));
    }

    /// A running replica takes a key rotated into its file without a restart: a value sealed
    /// under the new key opens, new values are sealed under it, and a broken file (a careless
    /// copy with mode 0644) keeps the keys in use.
    #[cfg(unix)]
    #[test]
    fn a_loaded_keyring_follows_its_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring.key");
        let running = Keyring::generate_file(&path).unwrap();
        let old_id = running.current_key_id();
        assert!(!running.refresh(), "an unchanged file is not read again");

        let new_id = Keyring::add_key_to_file(&path).unwrap();
        let rotated = Keyring::load(&path).unwrap().seal("S", "v2").unwrap();
        assert_eq!(rotated.key_id, new_id);
        let opened = running.open("S", &rotated.key_id, &rotated.bytes).unwrap();
        assert_eq!(opened.expose(), "v2");
        assert_eq!(running.key_ids(), [new_id.clone(), old_id.clone()]);
        assert_eq!(running.seal("T", "w").unwrap().key_id, new_id);
        // A clone shares the reloaded keys.
        assert_eq!(running.clone().current_key_id(), new_id);

        // A key no file holds: the unchanged file is not read again, and the error stays.
        assert!(matches!(
            running.open("S", "k-nowhere", &rotated.bytes),
            Err(StoreError::SecretKeyMissing { .. })
        ));
        let third = Keyring::add_key_to_file(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!running.refresh(), "a file others may read is not taken");
        assert_eq!(running.current_key_id(), new_id);
        assert_ne!(third, new_id);
    }

    #[cfg(unix)]
    #[test]
    fn generated_files_are_private_and_grow_at_the_front() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.key");
        let first = Keyring::load_or_generate(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = Keyring::load_or_generate(&path).unwrap();
        assert_eq!(again.key_ids(), first.key_ids(), "an existing file is kept");
        assert!(matches!(
            Keyring::generate_file(&path),
            Err(KeyringError::Io { .. })
        ));
        let sealed = first.seal("S", "v").unwrap();

        let new_id = Keyring::add_key_to_file(&path).unwrap();
        let grown = Keyring::load(&path).unwrap();
        assert_eq!(grown.current_key_id(), new_id);
        assert_eq!(grown.key_ids()[1], first.current_key_id());
        assert_eq!(
            grown
                .open("S", &sealed.key_id, &sealed.bytes)
                .unwrap()
                .expose(),
            "v"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(
            Keyring::load(&path),
            Err(KeyringError::Permissions { mode: 0o640, .. })
        ));
    }
}
