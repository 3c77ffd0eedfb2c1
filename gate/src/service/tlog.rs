//! Each tenant's log: its ledger seen as an RFC 6962 tree, with signed
//! checkpoints, inclusion proofs and consistency proofs.
//!
//! Guarantees:
//! - A tenant's log is a view of its ledger, nothing more: its leaves are
//!   the tenant's `ledger_entries`, in `seq` order, each leaf being the
//!   entry's stored canonical text (the bytes the HMAC chain hashes), so leaf
//!   `i` is entry `seq = i + 1`. [`leaves`] refuses a chain with a missing
//!   number ([`LogError::Gap`]) instead of building a tree that skips it.
//! - The tree is computed from the entries by each call that needs it (one
//!   read of the tenant's entries, in one statement); no tree state is kept.
//!   A checkpoint is signed by the background signer of `spendgate serve`
//!   ([`super::checkpointer`], which checks the tree before it signs) or
//!   when it is asked for (`spendgate log checkpoint`, `spendgate
//!   evidence`), never on an operation's commit path, which this module
//!   leaves untouched.
//! - The tenant's Ed25519 log key is derived from the gate's `log_key`
//!   secret ([`LogKey`], never in the database):
//!   `seed = SHA-256("spendgate/log-key/v1" || 0x00 || u32be(len(secret)) ||
//!   secret || tenant)`. Its key name and the log's origin are both
//!   `spendgate/<tenant>` ([`origin`]); a tenant id meets the identifier
//!   grammar, so it never holds the `+` or the white space a key name may
//!   not.
//! - [`sign_checkpoint`] signs the tree's current size and root and keeps
//!   the note in `log_checkpoints`, keyed by (tenant, size, root): every
//!   tree it signs is kept once (Ed25519 is deterministic, so the same tree
//!   signed again is the same note), so a consistency proof can start from
//!   any size a witness was shown. "Newest" is by the instant of signing.
//! - [`prove_inclusion`] proves an entry against the newest kept checkpoint
//!   that covers it, after checking that the tree computed now still has that
//!   checkpoint's root at its size (a ledger rewritten since is
//!   [`LogError::Rewritten`], never a proof against a root it no longer
//!   has); with no such checkpoint it signs one.
//! - [`prove_consistency`] proves the newest kept checkpoint (or a given
//!   size) consistent with an older size.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use spendgate_verify::checkpoint::{Checkpoint, CheckpointError};
use spendgate_verify::merkle::{MerkleError, Tree, hash_to_base64, leaf_hash};
use spendgate_verify::note::{NoteError, SignerKey, VerifierKey};
use spendgate_verify::proof::TlogProof;
use spendgate_verify::witness::ConsistencyProof;
use sqlx::PgPool;

/// The domain the tenants' log keys are derived under.
pub const LOG_KEY_DOMAIN: &[u8] = b"spendgate/log-key/v1";
/// What every log's origin (and key name) starts with.
pub const ORIGIN_PREFIX: &str = "spendgate/";

/// The secret every tenant's log key is derived from. The gate holds it;
/// the database never sees it. Its `Debug` never shows it.
#[derive(Clone)]
pub struct LogKey {
    secret: Vec<u8>,
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogKey(..)")
    }
}

/// Why the log could not be read, proved or signed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("a log key must be at least {min} bytes; this one is {len}", min = LogKey::MIN_LEN)]
    KeyTooShort { len: usize },
    #[error("{action}: {cause}")]
    Database {
        action: &'static str,
        cause: sqlx::Error,
    },
    #[error("tenant {tenant}'s ledger has no entry {missing} but has entries after it")]
    Gap { tenant: String, missing: i64 },
    #[error("tenant {tenant}'s ledger has no entry {seq} (it has {size})")]
    NoSuchEntry { tenant: String, seq: i64, size: u64 },
    #[error("tenant {tenant} has no checkpoint of size {size} or more")]
    NoCheckpoint { tenant: String, size: u64 },
    #[error(
        "tenant {tenant}'s ledger no longer has the root of its checkpoint of size {size}: \
         signed {signed}, computed now {now}"
    )]
    Rewritten {
        tenant: String,
        size: u64,
        signed: String,
        now: String,
    },
    #[error("the log of tenant {tenant}: {cause}")]
    Merkle { tenant: String, cause: MerkleError },
    #[error("the log key of tenant {tenant}: {cause}")]
    Note { tenant: String, cause: NoteError },
    #[error("the checkpoint of tenant {tenant}: {cause}")]
    Checkpoint {
        tenant: String,
        cause: CheckpointError,
    },
    #[error("integrating the queued ledger entries: {0}")]
    Integration(Box<super::error::ServiceError>),
}

fn db(action: &'static str) -> impl FnOnce(sqlx::Error) -> LogError {
    move |cause| LogError::Database { action, cause }
}

impl LogKey {
    /// The shortest secret accepted.
    pub const MIN_LEN: usize = 32;

    /// A log key of the given secret (at least [`Self::MIN_LEN`] bytes).
    pub fn new(secret: &[u8]) -> Result<Self, LogError> {
        if secret.len() < Self::MIN_LEN {
            return Err(LogError::KeyTooShort { len: secret.len() });
        }
        Ok(LogKey {
            secret: secret.to_vec(),
        })
    }

    /// The tenant's Ed25519 seed (see the module's derivation).
    fn seed(&self, tenant: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(LOG_KEY_DOMAIN);
        h.update([0u8]);
        h.update((self.secret.len() as u32).to_be_bytes());
        h.update(&self.secret);
        h.update(tenant.as_bytes());
        h.finalize().into()
    }

    /// The tenant's signing key, named by the tenant's origin.
    pub fn signer(&self, tenant: &str) -> Result<SignerKey, LogError> {
        SignerKey::from_seed(&origin(tenant), &self.seed(tenant)).map_err(|cause| LogError::Note {
            tenant: tenant.to_owned(),
            cause,
        })
    }

    /// The tenant's verifier key, for anyone who checks its log.
    pub fn verifier(&self, tenant: &str) -> Result<VerifierKey, LogError> {
        Ok(self.signer(tenant)?.verifier())
    }
}

/// The tenant's log origin (and key name): `spendgate/<tenant>`.
pub fn origin(tenant: &str) -> String {
    format!("{ORIGIN_PREFIX}{tenant}")
}

/// The tenant's leaves: `(seq, entry text)` in `seq` order, numbered 1, 2, ...
pub async fn leaves(pool: &PgPool, tenant: &str) -> Result<Vec<(i64, String)>, LogError> {
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT seq, entry FROM ledger_entries WHERE tenant_id = $1 ORDER BY seq")
            .bind(tenant)
            .fetch_all(pool)
            .await
            .map_err(db("reading the tenant's ledger entries"))?;
    for (i, (seq, _)) in rows.iter().enumerate() {
        let want = i as i64 + 1;
        if *seq != want {
            return Err(LogError::Gap {
                tenant: tenant.to_owned(),
                missing: want,
            });
        }
    }
    Ok(rows)
}

/// The tree of `leaves`.
pub fn tree_of(leaves: &[(i64, String)]) -> Tree {
    Tree::from_leaf_hashes(leaves.iter().map(|(_, e)| leaf_hash(e.as_bytes())))
}

/// The tenant's tree as its ledger holds it now.
pub async fn tree(pool: &PgPool, tenant: &str) -> Result<Tree, LogError> {
    Ok(tree_of(&leaves(pool, tenant).await?))
}

/// A checkpoint kept in `log_checkpoints`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    pub size: u64,
    /// The root, in standard base64.
    pub root: String,
    /// The signed note, verbatim.
    pub note: String,
    pub signed_at: DateTime<Utc>,
}

fn stored((size, root, note, signed_at): (i64, String, String, DateTime<Utc>)) -> StoredCheckpoint {
    StoredCheckpoint {
        size: size.max(0) as u64,
        root,
        note,
        signed_at,
    }
}

fn merkle(tenant: &str) -> impl FnOnce(MerkleError) -> LogError + '_ {
    move |cause| LogError::Merkle {
        tenant: tenant.to_owned(),
        cause,
    }
}

/// Signs `tree`'s current size and root for `tenant` and keeps the note
/// (the one kept already when this tree was signed before).
pub async fn sign_tree(
    pool: &PgPool,
    key: &LogKey,
    tenant: &str,
    tree: &Tree,
    at: DateTime<Utc>,
) -> Result<StoredCheckpoint, LogError> {
    let mut kept = sign_trees(pool, key, &[(tenant, tree)], at).await?;
    kept.pop().ok_or(LogError::Database {
        action: "keeping a signed checkpoint",
        cause: sqlx::Error::RowNotFound,
    })
}

/// Signs each tenant's tree and keeps every note in one statement (the one
/// kept already for a tree signed before); the checkpoints come back in the
/// order of `trees`.
pub async fn sign_trees(
    pool: &PgPool,
    key: &LogKey,
    trees: &[(&str, &Tree)],
    at: DateTime<Utc>,
) -> Result<Vec<StoredCheckpoint>, LogError> {
    let mut tenants = Vec::with_capacity(trees.len());
    let mut sizes = Vec::with_capacity(trees.len());
    let mut roots = Vec::with_capacity(trees.len());
    let mut notes = Vec::with_capacity(trees.len());
    for (tenant, tree) in trees {
        let checkpoint = Checkpoint::new(&origin(tenant), tree.len(), tree.root());
        let note = checkpoint
            .sign(&key.signer(tenant)?)
            .map_err(|cause| LogError::Checkpoint {
                tenant: (*tenant).to_owned(),
                cause,
            })?;
        tenants.push(*tenant);
        sizes.push(tree.len() as i64);
        roots.push(checkpoint.root_base64());
        notes.push(note);
    }
    if tenants.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(i32, i64, String, String, DateTime<Utc>)> = sqlx::query_as(
        "WITH want AS ( \
             SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[]) \
                    WITH ORDINALITY AS w(tenant_id, size, root, note, n)), \
         kept AS ( \
             INSERT INTO log_checkpoints (tenant_id, size, root, note, signed_at) \
             SELECT tenant_id, size, root, note, $5 FROM want ORDER BY n \
             ON CONFLICT DO NOTHING \
             RETURNING tenant_id, size, root, note, signed_at) \
         SELECT w.n::int, k.size, k.root, k.note, k.signed_at \
           FROM want w JOIN kept k \
             ON k.tenant_id = w.tenant_id AND k.size = w.size AND k.root = w.root \
         UNION ALL \
         SELECT w.n::int, k.size, k.root, k.note, k.signed_at \
           FROM want w JOIN log_checkpoints k \
             ON k.tenant_id = w.tenant_id AND k.size = w.size AND k.root = w.root \
          WHERE NOT EXISTS (SELECT 1 FROM kept WHERE kept.tenant_id = w.tenant_id \
                              AND kept.size = w.size AND kept.root = w.root) \
          ORDER BY 1",
    )
    .bind(&tenants)
    .bind(&sizes)
    .bind(&roots)
    .bind(&notes)
    .bind(at)
    .fetch_all(pool)
    .await
    .map_err(db("keeping signed checkpoints"))?;
    if rows.len() != trees.len() {
        return Err(LogError::Database {
            action: "keeping signed checkpoints: a checkpoint was neither kept nor found",
            cause: sqlx::Error::RowNotFound,
        });
    }
    Ok(rows
        .into_iter()
        .map(|(_, size, root, note, signed_at)| stored((size, root, note, signed_at)))
        .collect())
}

/// Signs the tenant's tree as its ledger holds it now, keeps the note and
/// returns it.
pub async fn sign_checkpoint(
    pool: &PgPool,
    key: &LogKey,
    tenant: &str,
    at: DateTime<Utc>,
) -> Result<StoredCheckpoint, LogError> {
    let tree = tree(pool, tenant).await?;
    sign_tree(pool, key, tenant, &tree, at).await
}

/// The newest kept checkpoint of the tenant of at least `min_size`.
pub async fn latest_checkpoint(
    pool: &PgPool,
    tenant: &str,
    min_size: u64,
) -> Result<Option<StoredCheckpoint>, LogError> {
    let row: Option<(i64, String, String, DateTime<Utc>)> = sqlx::query_as(
        "SELECT size, root, note, signed_at FROM log_checkpoints \
         WHERE tenant_id = $1 AND size >= $2 ORDER BY signed_at DESC, size DESC LIMIT 1",
    )
    .bind(tenant)
    .bind(min_size as i64)
    .fetch_optional(pool)
    .await
    .map_err(db("reading the newest checkpoint"))?;
    Ok(row.map(stored))
}

/// Whether `tree` still has `checkpoint`'s root at its size.
fn still_holds(tenant: &str, tree: &Tree, checkpoint: &StoredCheckpoint) -> Result<(), LogError> {
    let now = hash_to_base64(&tree.root_at(checkpoint.size).map_err(merkle(tenant))?);
    if now != checkpoint.root {
        return Err(LogError::Rewritten {
            tenant: tenant.to_owned(),
            size: checkpoint.size,
            signed: checkpoint.root.clone(),
            now,
        });
    }
    Ok(())
}

/// The newest kept checkpoint covering `size` leaves, checked against
/// `tree`; one signed now when none is kept.
async fn covering(
    pool: &PgPool,
    key: &LogKey,
    tenant: &str,
    tree: &Tree,
    size: u64,
    at: DateTime<Utc>,
) -> Result<StoredCheckpoint, LogError> {
    let checkpoint = match latest_checkpoint(pool, tenant, size).await? {
        Some(c) if c.size <= tree.len() => c,
        Some(c) => {
            return Err(LogError::Rewritten {
                tenant: tenant.to_owned(),
                size: c.size,
                signed: c.root,
                now: format!("a tree of {} leaves", tree.len()),
            });
        }
        None => sign_tree(pool, key, tenant, tree, at).await?,
    };
    still_holds(tenant, tree, &checkpoint)?;
    Ok(checkpoint)
}

/// One entry's text and its tlog proof.
#[derive(Debug, Clone)]
pub struct Inclusion {
    pub seq: i64,
    pub entry: String,
    pub proof: TlogProof,
}

/// Proves entries `seqs` of the tenant's log against one checkpoint: the
/// newest kept one covering them all, or one signed now.
pub async fn prove_inclusion(
    pool: &PgPool,
    key: &LogKey,
    tenant: &str,
    seqs: &[i64],
    at: DateTime<Utc>,
) -> Result<(StoredCheckpoint, Vec<Inclusion>), LogError> {
    let leaves = leaves(pool, tenant).await?;
    let tree = tree_of(&leaves);
    let size = tree.len();
    let mut wanted = Vec::with_capacity(seqs.len());
    for &seq in seqs {
        let Some((_, entry)) = usize::try_from(seq - 1).ok().and_then(|i| leaves.get(i)) else {
            return Err(LogError::NoSuchEntry {
                tenant: tenant.to_owned(),
                seq,
                size,
            });
        };
        wanted.push((seq, entry.clone()));
    }
    let need = wanted.iter().map(|(s, _)| *s as u64).max().unwrap_or(0);
    let checkpoint = covering(pool, key, tenant, &tree, need, at).await?;
    let out = proofs_against(tenant, &tree, &checkpoint, wanted)?;
    Ok((checkpoint, out))
}

/// Each of `wanted` (an entry's number and text) with its proof against
/// `checkpoint`, once `tree` is seen to still have the checkpoint's root at
/// its size: a log cut below the checkpoint or rewritten under it is
/// [`LogError::Rewritten`], never a proof that cannot verify.
pub(crate) fn proofs_against(
    tenant: &str,
    tree: &Tree,
    checkpoint: &StoredCheckpoint,
    wanted: Vec<(i64, String)>,
) -> Result<Vec<Inclusion>, LogError> {
    if checkpoint.size > tree.len() {
        return Err(LogError::Rewritten {
            tenant: tenant.to_owned(),
            size: checkpoint.size,
            signed: checkpoint.root.clone(),
            now: format!("a tree of {} leaves", tree.len()),
        });
    }
    still_holds(tenant, tree, checkpoint)?;
    wanted
        .into_iter()
        .map(|(seq, entry)| {
            let index = seq as u64 - 1;
            let path = tree
                .inclusion_proof(index, checkpoint.size)
                .map_err(merkle(tenant))?;
            Ok(Inclusion {
                seq,
                entry,
                proof: TlogProof {
                    extra: None,
                    index,
                    path,
                    checkpoint_note: checkpoint.note.clone(),
                },
            })
        })
        .collect()
}

/// Proves the tenant's checkpoint of size `to` (the newest kept one when
/// `None`) consistent with the tree of size `from`; the checkpoint and the
/// proof.
pub async fn prove_consistency(
    pool: &PgPool,
    tenant: &str,
    from: u64,
    to: Option<u64>,
) -> Result<(StoredCheckpoint, ConsistencyProof), LogError> {
    let tree = tree(pool, tenant).await?;
    let checkpoint = match to {
        None => latest_checkpoint(pool, tenant, 0).await?,
        Some(size) => {
            let row: Option<(i64, String, String, DateTime<Utc>)> = sqlx::query_as(
                "SELECT size, root, note, signed_at FROM log_checkpoints \
                 WHERE tenant_id = $1 AND size = $2 ORDER BY signed_at DESC, size DESC LIMIT 1",
            )
            .bind(tenant)
            .bind(size as i64)
            .fetch_optional(pool)
            .await
            .map_err(db("reading a checkpoint"))?;
            row.map(stored)
        }
    }
    .ok_or_else(|| LogError::NoCheckpoint {
        tenant: tenant.to_owned(),
        size: to.unwrap_or(0),
    })?;
    if checkpoint.size > tree.len() {
        return Err(LogError::Rewritten {
            tenant: tenant.to_owned(),
            size: checkpoint.size,
            signed: checkpoint.root,
            now: format!("a tree of {} leaves", tree.len()),
        });
    }
    still_holds(tenant, &tree, &checkpoint)?;
    let hashes = tree
        .consistency_proof(from, checkpoint.size)
        .map_err(merkle(tenant))?;
    Ok((
        checkpoint,
        ConsistencyProof {
            old_size: from,
            hashes,
        },
    ))
}

/// The requests a ledger entry names: its subject, and `body.request` when
/// the body has one. Read here, not by Postgres: an entry may quote text a
/// caller sent with `\u0000` in it, which Postgres's `jsonb` cannot hold, so
/// a query that casts entries to `jsonb` fails for the whole tenant.
fn named_requests(entry: &str) -> impl Iterator<Item = String> {
    let value: serde_json::Value = serde_json::from_str(entry).unwrap_or_default();
    let subject = value
        .get("subject")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    let request = value
        .pointer("/body/request")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    subject.into_iter().chain(request)
}

/// The numbers of the entries of `leaves` that name `request` (as their
/// subject or as `body.request`), in order.
pub fn seqs_naming(leaves: &[(i64, String)], request: &str) -> Vec<i64> {
    leaves
        .iter()
        .filter(|(_, entry)| named_requests(entry).any(|r| r == request))
        .map(|(seq, _)| *seq)
        .collect()
}

/// The entries that name `request` in the tenant's ledger (as their
/// subject or as `body.request`), by number.
pub async fn request_entry_seqs(
    pool: &PgPool,
    tenant: &str,
    request: &str,
) -> Result<Vec<i64>, LogError> {
    let entries: Vec<(i64, String)> =
        sqlx::query_as("SELECT seq, entry FROM ledger_entries WHERE tenant_id = $1 ORDER BY seq")
            .bind(tenant)
            .fetch_all(pool)
            .await
            .map_err(db("finding a request's ledger entries"))?;
    Ok(seqs_naming(&entries, request))
}

/// For every request of the tenant, the log part of its evidence bundle
/// (its entries, each with a tlog proof against a checkpoint of the tree as
/// it is now, signed but not kept) checked with the tenant's public key
/// alone, as `spendgate-verify verify-bundle` checks it. `Ok(Err(..))`
/// names the first request and item that does not verify; nothing is
/// written.
pub async fn check_evidence(
    pool: &PgPool,
    key: &LogKey,
    tenant: &str,
) -> Result<Result<usize, String>, LogError> {
    use spendgate_verify::bundle::{Item, check_all};
    let leaves = leaves(pool, tenant).await?;
    let tree = tree_of(&leaves);
    let note = Checkpoint::new(&origin(tenant), tree.len(), tree.root())
        .sign(&key.signer(tenant)?)
        .map_err(|cause| LogError::Checkpoint {
            tenant: tenant.to_owned(),
            cause,
        })?;
    let verifier = key.verifier(tenant)?;
    let requests: Vec<String> =
        sqlx::query_scalar("SELECT id FROM payment_requests WHERE tenant_id = $1 ORDER BY id")
            .bind(tenant)
            .fetch_all(pool)
            .await
            .map_err(db("listing the tenant's requests"))?;
    // Each entry read once: the entries naming each request, by number.
    let mut naming: std::collections::BTreeMap<String, Vec<i64>> =
        std::collections::BTreeMap::new();
    for (seq, entry) in &leaves {
        let mut names: Vec<String> = named_requests(entry).collect();
        names.dedup();
        for name in names {
            naming.entry(name).or_default().push(*seq);
        }
    }
    let mut checked = 0;
    for request in requests {
        let seqs = naming.remove(&request).unwrap_or_default();
        let mut files = Vec::with_capacity(seqs.len());
        for seq in seqs {
            let Some((_, entry)) = usize::try_from(seq - 1).ok().and_then(|i| leaves.get(i)) else {
                return Ok(Err(format!(
                    "request {request}: entry {seq} is not in the log"
                )));
            };
            let index = seq as u64 - 1;
            let proof = TlogProof {
                extra: None,
                index,
                path: tree
                    .inclusion_proof(index, tree.len())
                    .map_err(merkle(tenant))?,
                checkpoint_note: note.clone(),
            };
            files.push((seq, entry.clone(), proof.to_text()));
        }
        if files.is_empty() {
            return Ok(Err(format!("request {request}: no ledger entry names it")));
        }
        let mut items = vec![Item::checkpoint(
            "checkpoint",
            note.as_bytes(),
            &verifier,
            None,
        )];
        for (seq, entry, proof) in &files {
            items.push(Item::included_entry(
                format!("entries/{seq:06}.json"),
                entry.as_bytes(),
                proof.as_bytes(),
                &verifier,
                None,
            ));
        }
        match check_all(&items) {
            Ok(n) => checked += n,
            Err(e) => return Ok(Err(format!("request {request}: {e}"))),
        }
    }
    Ok(Ok(checked))
}

/// Every checkpoint kept for the tenant, in the order signed, and then the
/// tree as it is now, shown to one witness: each must be consistent with the
/// one before (from the empty tree). `Ok(Err(..))` names the first the
/// witness refuses; nothing is written.
pub async fn check_consistency(
    pool: &PgPool,
    key: &LogKey,
    tenant: &str,
) -> Result<Result<usize, String>, LogError> {
    use spendgate_verify::witness::Witness;
    let tree = tree(pool, tenant).await?;
    let mut notes: Vec<String> = sqlx::query_scalar(
        "SELECT note FROM log_checkpoints WHERE tenant_id = $1 ORDER BY signed_at, size",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await
    .map_err(db("reading the tenant's checkpoints"))?;
    notes.push(
        Checkpoint::new(&origin(tenant), tree.len(), tree.root())
            .sign(&key.signer(tenant)?)
            .map_err(|cause| LogError::Checkpoint {
                tenant: tenant.to_owned(),
                cause,
            })?,
    );
    let mut witness = match Witness::new(key.verifier(tenant)?, None, None) {
        Ok(w) => w,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let mut old = 0;
    for (i, note) in notes.iter().enumerate() {
        let parsed = spendgate_verify::note::Note::parse(note.as_bytes())
            .ok()
            .and_then(|n| Checkpoint::parse_text(n.text()).ok());
        let Some(new) = parsed else {
            return Ok(Err(format!("kept checkpoint {} does not parse", i + 1)));
        };
        let new_size = new.size;
        if new_size < old || new_size > tree.len() {
            return Ok(Err(format!(
                "checkpoint {} has size {new_size}, after {old}, of a tree of {}",
                i + 1,
                tree.len()
            )));
        }
        let proof = ConsistencyProof {
            old_size: old,
            hashes: tree
                .consistency_proof(old, new_size)
                .map_err(merkle(tenant))?,
        };
        if let Err(e) = witness.check(note, &proof) {
            return Ok(Err(format!("checkpoint {}: {e}", i + 1)));
        }
        old = new_size;
    }
    Ok(Ok(notes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use spendgate_verify::checkpoint;

    #[test]
    fn each_tenant_has_its_own_key_named_by_its_origin() {
        let key = LogKey::new(&[7u8; 32]).unwrap();
        let acme = key.verifier("acme").unwrap();
        let globex = key.verifier("globex").unwrap();
        assert_eq!(acme.name(), "spendgate/acme");
        assert_ne!(acme.to_text(), globex.to_text().replace("globex", "acme"));
        assert_eq!(acme, key.verifier("acme").unwrap());
        let other = LogKey::new(&[8u8; 32]).unwrap().verifier("acme").unwrap();
        assert_ne!(acme, other);
        assert_eq!(format!("{key:?}"), "LogKey(..)");
    }

    #[test]
    fn the_seed_is_the_documented_derivation() {
        let key = LogKey::new(b"0123456789abcdef0123456789abcdef").unwrap();
        let mut h = Sha256::new();
        h.update(b"spendgate/log-key/v1\x00\x00\x00\x00\x20");
        h.update(b"0123456789abcdef0123456789abcdef");
        h.update(b"acme");
        let seed: [u8; 32] = h.finalize().into();
        assert_eq!(key.seed("acme"), seed);
    }

    #[test]
    fn a_short_log_key_is_refused() {
        assert!(matches!(
            LogKey::new(b"short"),
            Err(LogError::KeyTooShort { len: 5 })
        ));
    }

    #[test]
    fn a_checkpoint_signed_by_a_tenant_key_verifies_under_its_verifier() {
        let key = LogKey::new(&[9u8; 40]).unwrap();
        let leaves = vec![(1, "{\"a\":1}".to_owned()), (2, "{\"b\":2}".to_owned())];
        let tree = tree_of(&leaves);
        let note = Checkpoint::new(&origin("acme"), 2, tree.root())
            .sign(&key.signer("acme").unwrap())
            .unwrap();
        let cp = checkpoint::open(note.as_bytes(), &key.verifier("acme").unwrap(), None).unwrap();
        assert_eq!(cp.size, 2);
        assert!(checkpoint::open(note.as_bytes(), &key.verifier("globex").unwrap(), None).is_err());
    }
}
