//! Offline checks for spendgate's evidence, with public keys only.
//!
//! A tenant's ledger entries are the leaves of an RFC 6962 SHA-256 Merkle
//! tree; the log signs checkpoints (C2SP signed notes, Ed25519); each entry
//! comes with an inclusion proof in the `c2sp.org/tlog-proof@v1` format; a
//! witness that kept an older checkpoint refuses a newer one the log cannot
//! prove consistent with it. This crate checks all of that without a
//! database, an async runtime or a network client (`tests/dependencies.rs`
//! reads `cargo tree` to keep it so), and names the first thing that fails.
//!
//! - [`merkle`]: leaf and node hashes, [`merkle::Tree`] (append, root at any
//!   size, inclusion and consistency proofs), and the two verifications,
//!   run against `transparency-dev/merkle`'s test vectors.
//! - [`note`]: signed notes, Ed25519 signer and verifier keys, key ids;
//!   checked against the `golang.org/x/mod/sumdb/note` known answer.
//! - [`checkpoint`]: the tlog-checkpoint body, signed and verified.
//! - [`proof`]: the tlog-proof file, written, read and verified.
//! - [`witness`]: the last accepted checkpoint and the consistency check.
//! - [`bundle`]: a list of named items checked in order (the seam for an
//!   evidence bundle's reader).
//! - [`bundle_dir`]: an evidence bundle on disk (checkpoint, entries and
//!   their proofs), checked through [`bundle`].
//!
//! # Dependencies, and the crates not taken
//!
//! Taken: `ed25519-dalek` 3 (the maintained RustCrypto-adjacent Ed25519,
//! used with `verify_strict`), `sha2` 0.11 (already the workspace's),
//! `base64` 0.23 without its default SIMD engine, `thiserror`, `clap` for
//! the binary.
//!
//! Left, after reading their 0.x sources:
//! - `signed_note` 0.2 (Cloudflare's azul): a faithful port of the Go note
//!   package, but pinned to `ed25519-dalek` 2, `sha2` 0.10, `base64` 0.21,
//!   `rand_core` 0.6 and `thiserror` 1, so it would put a second copy of
//!   the whole signature stack beside the workspace's; it is young (0.2)
//!   and the part this crate needs (one key type, one line grammar) is a
//!   few hundred lines checked here against the same known answer.
//! - `tlog_tiles` 0.2 (same project): built for serving tiled logs (tile
//!   paths, URL handling, `serde_json`, `url`), on the same older stack;
//!   nothing here reads tiles, and it does not write `tlog-proof` files.
//! - `ct-merkle` 0.3: sound RFC 6962 code on the current `digest`, but its
//!   verification takes the leaf's value, not its hash (the tlog-proof
//!   leaf hash is application-defined, and the test vectors give hashes),
//!   it refuses any consistency check from the empty tree (a witness
//!   starts there), its tree keeps the leaves' values in memory, and its
//!   README says it has not been audited. The tree and the two RFC 9162
//!   verification algorithms are short; the vectors check them here.

#![forbid(unsafe_code)]

pub mod bundle;
pub mod bundle_dir;
pub mod checkpoint;
pub mod merkle;
pub mod note;
pub mod proof;
pub mod witness;
