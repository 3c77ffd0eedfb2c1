//! The RFC 6962 SHA-256 Merkle tree (RFC 6962 §2.1, RFC 9162 §2.1).
//!
//! Guarantees:
//! - [`leaf_hash`] is `SHA-256(0x00 || leaf)` and [`node_hash`] is
//!   `SHA-256(0x01 || left || right)`; the empty tree's root is `SHA-256("")`.
//! - [`Tree`] keeps every leaf hash and every complete subtree hash, so the
//!   root at any size and any inclusion or consistency proof costs
//!   `O(log n)` hashes; its proofs are the RFC's `PATH` and `PROOF`.
//! - [`verify_inclusion`] and [`verify_consistency`] are the RFC 9162
//!   algorithms, total on every input (no panic, no overflow), and refuse
//!   with a named [`MerkleError`]: a proof of the wrong length, an index out
//!   of range, a root that does not match. Their preconditions follow
//!   `transparency-dev/merkle` (a consistency proof from the empty tree is
//!   refused as meaningless; equal sizes need an empty proof and equal
//!   roots), whose test vectors `tests/vectors.rs` runs.

use sha2::{Digest, Sha256};

/// A SHA-256 output: a leaf hash, a node hash or a root.
pub type Hash = [u8; 32];

/// Why a Merkle proof or a hash was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MerkleError {
    #[error("a hash must be 32 bytes, this one has {got}")]
    HashLength { got: usize },
    #[error("leaf index {index} is not in a tree of size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("the proof has {got} hashes, a proof for these sizes has {expected}")]
    ProofLength { expected: usize, got: usize },
    #[error("the proof computes root {computed}, the checkpoint says {expected}")]
    RootMismatch { expected: String, computed: String },
    #[error("the old tree size {old} is larger than the new tree size {new}")]
    OldTreeLarger { old: u64, new: u64 },
    #[error("a consistency proof from the empty tree proves nothing")]
    EmptyOldTree,
    #[error("the two trees have the same size {size} but the proof is not empty")]
    ProofForEqualSizes { size: u64 },
    #[error("the two trees have the same size {size} but different roots {first} and {second}")]
    EqualSizesDifferentRoots {
        size: u64,
        first: String,
        second: String,
    },
    #[error("size {size} is beyond this tree's {len} leaves")]
    SizeBeyondTree { size: u64, len: u64 },
}

/// The standard base64 text of a hash, as checkpoints and proofs write it.
pub fn hash_to_base64(hash: &Hash) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(hash)
}

/// A hash from exactly 32 bytes.
pub fn hash_from_slice(bytes: &[u8]) -> Result<Hash, MerkleError> {
    Hash::try_from(bytes).map_err(|_| MerkleError::HashLength { got: bytes.len() })
}

/// The RFC 6962 leaf hash of an entry: `SHA-256(0x00 || leaf)`.
pub fn leaf_hash(leaf: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(leaf);
    h.finalize().into()
}

/// The RFC 6962 interior node hash: `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of the empty tree: `SHA-256("")`.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The largest power of two strictly smaller than `n` (`n >= 2`).
fn split_point(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1u64 << (63 - (n - 1).leading_zeros())
}

/// An append-only RFC 6962 tree held in memory: the leaf hashes and, for
/// each level, the hashes of the complete subtrees already closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    /// `levels[k][i]` is the hash of leaves `[i * 2^k, (i + 1) * 2^k)`.
    levels: Vec<Vec<Hash>>,
}

impl Tree {
    /// The empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tree holding these leaf hashes, in order.
    pub fn from_leaf_hashes(hashes: impl IntoIterator<Item = Hash>) -> Self {
        let mut tree = Self::new();
        for h in hashes {
            tree.append_leaf_hash(h);
        }
        tree
    }

    /// The number of leaves.
    pub fn len(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64)
    }

    /// Whether the tree has no leaf.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends an entry (hashed with [`leaf_hash`]) and returns its index.
    pub fn append(&mut self, leaf: &[u8]) -> u64 {
        self.append_leaf_hash(leaf_hash(leaf))
    }

    /// Appends an already computed leaf hash and returns its index.
    pub fn append_leaf_hash(&mut self, hash: Hash) -> u64 {
        let index = self.len();
        let mut carry = hash;
        let mut level = 0;
        loop {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
            }
            let row = &mut self.levels[level];
            row.push(carry);
            if row.len() % 2 == 1 {
                break;
            }
            let n = row.len();
            carry = node_hash(&row[n - 2], &row[n - 1]);
            level += 1;
        }
        index
    }

    /// The leaf hash at `index`, if the tree has it.
    pub fn leaf_hash_at(&self, index: u64) -> Option<Hash> {
        self.levels
            .first()
            .and_then(|l| l.get(usize::try_from(index).ok()?))
            .copied()
    }

    fn check_size(&self, size: u64) -> Result<(), MerkleError> {
        if size > self.len() {
            return Err(MerkleError::SizeBeyondTree {
                size,
                len: self.len(),
            });
        }
        Ok(())
    }

    /// The hash of leaves `[start, end)`, where the range is one the RFC's
    /// recursion reaches (its left parts are complete, aligned subtrees).
    fn range_hash(&self, start: u64, end: u64) -> Hash {
        let n = end - start;
        if n.is_power_of_two() && start.is_multiple_of(n) {
            let level = n.trailing_zeros() as usize;
            return self.levels[level][(start >> level) as usize];
        }
        let k = split_point(n);
        node_hash(
            &self.range_hash(start, start + k),
            &self.range_hash(start + k, end),
        )
    }

    /// The root of the tree's first `size` leaves.
    pub fn root_at(&self, size: u64) -> Result<Hash, MerkleError> {
        self.check_size(size)?;
        Ok(if size == 0 {
            empty_root()
        } else {
            self.range_hash(0, size)
        })
    }

    /// The root of the whole tree.
    pub fn root(&self) -> Hash {
        if self.is_empty() {
            empty_root()
        } else {
            self.range_hash(0, self.len())
        }
    }

    /// The inclusion proof (audit path, leaf to root) of leaf `index` in the
    /// tree's first `size` leaves.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, MerkleError> {
        self.check_size(size)?;
        if index >= size {
            return Err(MerkleError::IndexOutOfRange { index, size });
        }
        let mut path = Vec::new();
        self.path(index, 0, size, &mut path);
        Ok(path)
    }

    /// RFC 6962 `PATH(m, D[start:end])`, appended leaf to root.
    fn path(&self, m: u64, start: u64, end: u64, out: &mut Vec<Hash>) {
        let n = end - start;
        if n == 1 {
            return;
        }
        let k = split_point(n);
        if m < k {
            self.path(m, start, start + k, out);
            out.push(self.range_hash(start + k, end));
        } else {
            self.path(m - k, start + k, end, out);
            out.push(self.range_hash(start, start + k));
        }
    }

    /// The consistency proof from the tree's first `old` leaves to its
    /// first `new` leaves (empty when `old` is 0 or equals `new`).
    pub fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, MerkleError> {
        self.check_size(new)?;
        if old > new {
            return Err(MerkleError::OldTreeLarger { old, new });
        }
        let mut proof = Vec::new();
        if old > 0 && old < new {
            self.subproof(old, 0, new, true, &mut proof);
        }
        Ok(proof)
    }

    /// RFC 6962 `SUBPROOF(m, D[start:end], b)`.
    fn subproof(&self, m: u64, start: u64, end: u64, whole: bool, out: &mut Vec<Hash>) {
        let n = end - start;
        if m == n {
            if !whole {
                out.push(self.range_hash(start, end));
            }
            return;
        }
        let k = split_point(n);
        if m <= k {
            self.subproof(m, start, start + k, whole, out);
            out.push(self.range_hash(start + k, end));
        } else {
            self.subproof(m - k, start + k, end, false, out);
            out.push(self.range_hash(start, start + k));
        }
    }
}

fn bit_len(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// The number of hashes in an inclusion proof of `index` in a tree of
/// `size` leaves (`index < size`).
pub fn inclusion_proof_len(index: u64, size: u64) -> usize {
    let inner = bit_len(index ^ (size - 1));
    let border = (index >> inner).count_ones();
    (inner + border) as usize
}

/// The number of hashes in a consistency proof from `old` to `new` leaves
/// (`0 < old < new`).
pub fn consistency_proof_len(old: u64, new: u64) -> usize {
    let fork = bit_len((old - 1) ^ (new - 1));
    let border = ((old - 1) >> fork).count_ones();
    let shift = old.trailing_zeros();
    let seed = usize::from(!old.is_power_of_two());
    seed + (fork - shift + border) as usize
}

fn mismatch(expected: &Hash, computed: &Hash) -> MerkleError {
    MerkleError::RootMismatch {
        expected: hash_to_base64(expected),
        computed: hash_to_base64(computed),
    }
}

/// Checks that `leaf` is the leaf hash at `index` in the tree of `size`
/// leaves whose root is `root` (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), MerkleError> {
    if index >= size {
        return Err(MerkleError::IndexOutOfRange { index, size });
    }
    let expected = inclusion_proof_len(index, size);
    if proof.len() != expected {
        return Err(MerkleError::ProofLength {
            expected,
            got: proof.len(),
        });
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return Err(MerkleError::ProofLength {
                expected,
                got: proof.len(),
            });
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(MerkleError::ProofLength {
            expected,
            got: proof.len(),
        });
    }
    if r != *root {
        return Err(mismatch(root, &r));
    }
    Ok(())
}

/// Checks that the tree of `old` leaves with root `old_root` is a prefix of
/// the tree of `new` leaves with root `new_root` (RFC 9162 §2.1.4.2).
pub fn verify_consistency(
    old: u64,
    new: u64,
    proof: &[Hash],
    old_root: &Hash,
    new_root: &Hash,
) -> Result<(), MerkleError> {
    if old > new {
        return Err(MerkleError::OldTreeLarger { old, new });
    }
    if old == 0 {
        return Err(MerkleError::EmptyOldTree);
    }
    if old == new {
        if !proof.is_empty() {
            return Err(MerkleError::ProofForEqualSizes { size: old });
        }
        if old_root != new_root {
            return Err(MerkleError::EqualSizesDifferentRoots {
                size: old,
                first: hash_to_base64(old_root),
                second: hash_to_base64(new_root),
            });
        }
        return Ok(());
    }
    let expected = consistency_proof_len(old, new);
    if proof.len() != expected {
        return Err(MerkleError::ProofLength {
            expected,
            got: proof.len(),
        });
    }
    let mut path = proof.iter();
    let seed = if old.is_power_of_two() {
        *old_root
    } else {
        match path.next() {
            Some(h) => *h,
            None => {
                return Err(MerkleError::ProofLength { expected, got: 0 });
            }
        }
    };
    let (mut f, mut s) = (old - 1, new - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (seed, seed);
    for c in path {
        if s == 0 {
            return Err(MerkleError::ProofLength {
                expected,
                got: proof.len(),
            });
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(MerkleError::ProofLength {
            expected,
            got: proof.len(),
        });
    }
    if fr != *old_root {
        return Err(mismatch(old_root, &fr));
    }
    if sr != *new_root {
        return Err(mismatch(new_root, &sr));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962's `MTH` written directly from its definition, as the
    /// reference the stored-subtree tree is compared with.
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = split_point(n as u64) as usize;
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n).map(|i| leaf_hash(&i.to_be_bytes())).collect()
    }

    #[test]
    fn roots_at_every_size_match_the_rfc_definition() {
        let all = leaves(70);
        let tree = Tree::from_leaf_hashes(all.clone());
        for size in 0..=70u64 {
            assert_eq!(tree.root_at(size), Ok(mth(&all[..size as usize])), "{size}");
        }
        assert_eq!(
            tree.root_at(71),
            Err(MerkleError::SizeBeyondTree { size: 71, len: 70 })
        );
    }

    #[test]
    fn every_generated_proof_verifies_and_has_the_computed_length() {
        let tree = Tree::from_leaf_hashes(leaves(40));
        for size in 1..=40u64 {
            let root = tree.root_at(size).unwrap();
            for index in 0..size {
                let proof = tree.inclusion_proof(index, size).unwrap();
                assert_eq!(proof.len(), inclusion_proof_len(index, size));
                let leaf = tree.leaf_hash_at(index).unwrap();
                assert_eq!(verify_inclusion(index, size, &leaf, &proof, &root), Ok(()));
            }
            for old in 1..=size {
                let proof = tree.consistency_proof(old, size).unwrap();
                if old < size {
                    assert_eq!(proof.len(), consistency_proof_len(old, size));
                }
                let old_root = tree.root_at(old).unwrap();
                assert_eq!(
                    verify_consistency(old, size, &proof, &old_root, &root),
                    Ok(()),
                    "{old} -> {size}"
                );
            }
        }
    }

    #[test]
    fn proofs_verify_at_sizes_past_a_thousand() {
        let all = leaves(1100);
        let tree = Tree::from_leaf_hashes(all.clone());
        for size in [1000u64, 1023, 1024, 1025, 1100] {
            let root = tree.root_at(size).unwrap();
            assert_eq!(root, mth(&all[..size as usize]), "{size}");
            for index in [0, 1, size / 2, size - 2, size - 1] {
                let proof = tree.inclusion_proof(index, size).unwrap();
                assert_eq!(
                    verify_inclusion(index, size, &all[index as usize], &proof, &root),
                    Ok(()),
                    "{index} in {size}"
                );
            }
            for old in [1, 2, 3, 511, 512, 513, size - 1, size] {
                let proof = tree.consistency_proof(old, size).unwrap();
                let old_root = tree.root_at(old).unwrap();
                assert_eq!(
                    verify_consistency(old, size, &proof, &old_root, &root),
                    Ok(()),
                    "{old} -> {size}"
                );
            }
        }
    }

    #[test]
    fn a_proof_for_one_leaf_does_not_prove_another() {
        let tree = Tree::from_leaf_hashes(leaves(11));
        let root = tree.root();
        let proof = tree.inclusion_proof(3, 11).unwrap();
        let other = tree.leaf_hash_at(4).unwrap();
        assert!(matches!(
            verify_inclusion(3, 11, &other, &proof, &root),
            Err(MerkleError::RootMismatch { .. })
        ));
    }

    #[test]
    fn a_rewritten_entry_breaks_consistency_with_the_old_root() {
        let mut rewritten = leaves(20);
        let honest = Tree::from_leaf_hashes(rewritten.clone());
        rewritten[5] = leaf_hash(b"forged");
        let forged = Tree::from_leaf_hashes(rewritten);
        let proof = forged.consistency_proof(10, 20).unwrap();
        assert!(matches!(
            verify_consistency(10, 20, &proof, &honest.root_at(10).unwrap(), &forged.root()),
            Err(MerkleError::RootMismatch { .. })
        ));
    }

    #[test]
    fn the_empty_tree_root_is_the_hash_of_nothing() {
        assert_eq!(
            hash_to_base64(&Tree::new().root()),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }
}
