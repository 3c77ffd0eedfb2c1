//! Signed mandates: the authority a tenant's agents spend under, signed by
//! a human who may approve.
//!
//! A mandate is the whole policy document of a tenant, with the tenant's id,
//! the version it publishes and the person who signs it ([`Mandate`]). Its
//! signed bytes are the RFC 8785 (JCS) canonical JSON of that document
//! ([`Mandate::canonical_bytes`]): two documents that differ only in key
//! order or number spelling have the same bytes, so a mandate stored as
//! `jsonb` and read back verifies as it was signed. The signature is
//! Ed25519 (`verify_strict`); the digest is the SHA-256 of the canonical
//! bytes, in hex ([`Mandate::digest`]).
//!
//! Guarantees:
//! - [`SignedMandate::verify`] accepts a mandate only when the keyring holds
//!   a key for the named signer in the named tenant and the signature
//!   verifies under it; anything else is a [`MandateError`], never a panic.
//! - A [`Keyring`] holds the humans' public keys as configured. A person
//!   without a configured key has no key: nothing they sign verifies.
//!   [`Keyring::world`] trusts the deterministic keys of a corpus's world
//!   ([`world_secret`]) and is for tests and the benchmark only.
//! - Key files carry a tag that says what they hold; a secret key is never
//!   printed by `Debug`.
//!
//! # The canonical JSON crate
//!
//! Taken: `serde_jcs` 0.2 (2025, edition 2024): a `serde::Serializer` that
//! writes RFC 8785 directly (sorted keys by UTF-16 code units, ECMAScript
//! number formatting through `ryu-js`), tested against the RFC's examples.
//! Left: `json-canon` 0.1.3, a sound implementation whose last release is
//! from 2023 and which adds nothing `serde_jcs` lacks.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The `format` every mandate document names: a signature over one format
/// is never a signature over another.
pub const FORMAT: &str = "spendgate.mandate.v1";

/// The tag of a public key, as written in a key file or a configuration.
pub const PUBLIC_TAG: &str = "ed25519:";

/// The tag of a secret key file's one line.
pub const SECRET_TAG: &str = "ed25519-secret:";

/// Why a mandate, a signature or a key was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MandateError {
    #[error("the mandate is not a mandate document: {0}")]
    Malformed(String),
    #[error("the mandate does not canonicalize: {0}")]
    Canonical(String),
    #[error("no key is configured for {signer} of tenant {tenant}")]
    NoKey { tenant: String, signer: String },
    #[error("the mandate carries no signature")]
    SignatureMissing,
    #[error("the signature is not 64 bytes of base64")]
    SignatureMalformed,
    #[error("the signature does not verify under the key of {signer} of tenant {tenant}")]
    SignatureInvalid { tenant: String, signer: String },
    #[error("not a key: {0}")]
    Key(String),
}

/// A mandate: the whole policy document of `tenant`, published as `version`
/// and signed by `signer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mandate {
    /// Always [`FORMAT`].
    #[serde(default = "format_name")]
    pub format: String,
    pub tenant: String,
    pub version: i64,
    pub signer: String,
    /// Every key of the tenant's policy.
    pub policy: serde_json::Value,
}

fn format_name() -> String {
    FORMAT.to_owned()
}

impl Mandate {
    pub fn new(
        tenant: impl Into<String>,
        version: i64,
        signer: impl Into<String>,
        policy: serde_json::Value,
    ) -> Mandate {
        Mandate {
            format: FORMAT.to_owned(),
            tenant: tenant.into(),
            version,
            signer: signer.into(),
            policy,
        }
    }

    /// The RFC 8785 canonical JSON of the document: the bytes signed.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, MandateError> {
        if self.format != FORMAT {
            return Err(MandateError::Malformed(format!(
                "format {:?} is not {FORMAT}",
                self.format
            )));
        }
        serde_jcs::to_vec(self).map_err(|e| MandateError::Canonical(e.to_string()))
    }

    /// The SHA-256 of the canonical bytes, lowercase hex.
    pub fn digest(&self) -> Result<String, MandateError> {
        Ok(hex::encode(Sha256::digest(self.canonical_bytes()?)))
    }

    /// This mandate signed with `key`.
    pub fn sign(self, key: &SecretKey) -> Result<SignedMandate, MandateError> {
        let bytes = self.canonical_bytes()?;
        let signature = key.0.sign(&bytes);
        Ok(SignedMandate {
            mandate: self,
            signature: Some(B64.encode(signature.to_bytes())),
        })
    }
}

/// A mandate and its signature (base64 of the 64 signature bytes): the
/// file `spendgate mandate sign` writes and `PUT /v1/policy` takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedMandate {
    pub mandate: Mandate,
    #[serde(default)]
    pub signature: Option<String>,
}

/// A mandate whose signature verified: its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub digest: String,
}

impl SignedMandate {
    /// Reads a signed mandate from JSON text.
    pub fn from_json(text: &[u8]) -> Result<SignedMandate, MandateError> {
        serde_json::from_slice(text).map_err(|e| MandateError::Malformed(e.to_string()))
    }

    /// Puts `bytes` as the signature (base64), whatever they are.
    pub fn set_signature_bytes(&mut self, bytes: &[u8; 64]) {
        self.signature = Some(B64.encode(bytes));
    }

    /// The signature's 64 bytes, or why there are none.
    pub fn signature_bytes(&self) -> Result<[u8; 64], MandateError> {
        let text = self
            .signature
            .as_deref()
            .ok_or(MandateError::SignatureMissing)?;
        let bytes = B64
            .decode(text)
            .map_err(|_| MandateError::SignatureMalformed)?;
        <[u8; 64]>::try_from(bytes.as_slice()).map_err(|_| MandateError::SignatureMalformed)
    }

    /// Accepts the mandate when `keys` holds a key for its signer in its
    /// tenant and the signature verifies under that key.
    pub fn verify(&self, keys: &Keyring) -> Result<Verified, MandateError> {
        let m = &self.mandate;
        let key = keys
            .key_for(&m.tenant, &m.signer)
            .ok_or_else(|| MandateError::NoKey {
                tenant: m.tenant.clone(),
                signer: m.signer.clone(),
            })?;
        let signature = Signature::from_bytes(&self.signature_bytes()?);
        let bytes = m.canonical_bytes()?;
        key.0
            .verify_strict(&bytes, &signature)
            .map_err(|_| MandateError::SignatureInvalid {
                tenant: m.tenant.clone(),
                signer: m.signer.clone(),
            })?;
        Ok(Verified {
            digest: hex::encode(Sha256::digest(&bytes)),
        })
    }
}

/// An Ed25519 public key of a human.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl PublicKey {
    /// `ed25519:` and the key's 32 bytes in base64.
    pub fn to_text(&self) -> String {
        format!("{PUBLIC_TAG}{}", B64.encode(self.0.as_bytes()))
    }

    /// Reads `ed25519:BASE64` (surrounding whitespace allowed).
    pub fn from_text(text: &str) -> Result<PublicKey, MandateError> {
        let body = text
            .trim()
            .strip_prefix(PUBLIC_TAG)
            .ok_or_else(|| MandateError::Key(format!("a public key starts {PUBLIC_TAG}")))?;
        let bytes = B64
            .decode(body)
            .map_err(|_| MandateError::Key("the public key is not base64".into()))?;
        let bytes = <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| MandateError::Key("a public key is 32 bytes".into()))?;
        VerifyingKey::from_bytes(&bytes)
            .map(PublicKey)
            .map_err(|_| MandateError::Key("not a point of the curve".into()))
    }
}

/// An Ed25519 secret key; `Debug` never shows it.
#[derive(Clone)]
pub struct SecretKey(SigningKey);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey([redacted])")
    }
}

impl SecretKey {
    /// The key whose secret is these 32 bytes.
    pub fn from_seed(seed: &[u8; 32]) -> SecretKey {
        SecretKey(SigningKey::from_bytes(seed))
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The secret key file's text: `ed25519-secret:BASE64` and a newline.
    pub fn to_file_text(&self) -> String {
        format!("{SECRET_TAG}{}\n", B64.encode(self.0.to_bytes()))
    }

    /// Reads a secret key file's text.
    pub fn from_file_text(text: &str) -> Result<SecretKey, MandateError> {
        let body = text
            .trim()
            .strip_prefix(SECRET_TAG)
            .ok_or_else(|| MandateError::Key(format!("a secret key file starts {SECRET_TAG}")))?;
        let bytes = B64
            .decode(body)
            .map_err(|_| MandateError::Key("the secret key is not base64".into()))?;
        let seed = <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| MandateError::Key("a secret key is 32 bytes".into()))?;
        Ok(SecretKey::from_seed(&seed))
    }
}

/// The deterministic secret key of person `person` of tenant `tenant` in a
/// corpus's world: the SHA-256 of `spendgate-world-key:T:P`. Public
/// knowledge: only for tests, the corpus and the benchmark.
pub fn world_secret(tenant: &str, person: &str) -> SecretKey {
    let seed: [u8; 32] = Sha256::digest(format!("spendgate-world-key:{tenant}:{person}")).into();
    SecretKey::from_seed(&seed)
}

/// The public keys of the humans who may sign, by tenant and person.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    keys: BTreeMap<(String, String), PublicKey>,
    world: bool,
}

impl Keyring {
    /// A keyring with no keys: nothing verifies.
    pub fn empty() -> Keyring {
        Keyring::default()
    }

    /// A keyring that trusts every world key ([`world_secret`]): for tests,
    /// the corpus and the benchmark, never for a served gate.
    pub fn world() -> Keyring {
        Keyring {
            keys: BTreeMap::new(),
            world: true,
        }
    }

    /// Adds `key` as the key of `person` of `tenant`.
    pub fn with(mut self, tenant: &str, person: &str, key: PublicKey) -> Keyring {
        self.insert(tenant, person, key);
        self
    }

    pub fn insert(&mut self, tenant: &str, person: &str, key: PublicKey) {
        self.keys
            .insert((tenant.to_owned(), person.to_owned()), key);
    }

    /// The key of `person` of `tenant`, when one is configured (or, in a
    /// world keyring, derived).
    pub fn key_for(&self, tenant: &str, person: &str) -> Option<PublicKey> {
        self.keys
            .get(&(tenant.to_owned(), person.to_owned()))
            .copied()
            .or_else(|| self.world.then(|| world_secret(tenant, person).public()))
    }

    /// How many keys are configured (a world keyring's derived keys not counted).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && !self.world
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mandate() -> Mandate {
        Mandate::new(
            "acme",
            2,
            "alice",
            json!({"daily_cap_paise": 500000, "currency": "INR", "merchants": ["m1"]}),
        )
    }

    #[test]
    fn canonical_bytes_sort_keys_and_ignore_the_order_written() {
        let m = mandate();
        let reordered: Mandate = serde_json::from_str(
            r#"{"signer":"alice","policy":{"merchants":["m1"],"currency":"INR","daily_cap_paise":500000},
                "version":2,"tenant":"acme","format":"spendgate.mandate.v1"}"#,
        )
        .expect("parses");
        assert_eq!(m.canonical_bytes(), reordered.canonical_bytes());
        assert_eq!(
            String::from_utf8(m.canonical_bytes().expect("bytes")).expect("utf-8"),
            r#"{"format":"spendgate.mandate.v1","policy":{"currency":"INR","daily_cap_paise":500000,"merchants":["m1"]},"signer":"alice","tenant":"acme","version":2}"#
        );
    }

    #[test]
    fn rfc_8785_numbers_are_written_as_ecmascript_writes_them() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"b":1.0e2,"a":-0.0,"c":1e21}"#).expect("json");
        assert_eq!(
            String::from_utf8(serde_jcs::to_vec(&v).expect("jcs")).expect("utf-8"),
            r#"{"a":0,"b":100,"c":1e+21}"#
        );
    }

    #[test]
    fn a_signed_mandate_verifies_under_its_signers_key_only() {
        let keys = Keyring::empty()
            .with("acme", "alice", world_secret("acme", "alice").public())
            .with("acme", "bob", world_secret("acme", "bob").public());
        let signed = mandate()
            .sign(&world_secret("acme", "alice"))
            .expect("signs");
        let verified = signed.verify(&keys).expect("verifies");
        assert_eq!(verified.digest, mandate().digest().expect("digest"));
        // Signed by bob's key, naming alice.
        let other = mandate().sign(&world_secret("acme", "bob")).expect("signs");
        assert!(matches!(
            other.verify(&keys),
            Err(MandateError::SignatureInvalid { .. })
        ));
    }

    #[test]
    fn a_flipped_bit_a_missing_or_malformed_signature_or_a_changed_field_fails() {
        let keys = Keyring::world();
        let signed = mandate()
            .sign(&world_secret("acme", "alice"))
            .expect("signs");
        let mut bytes = signed.signature_bytes().expect("64 bytes");
        bytes[0] ^= 1;
        let flipped = SignedMandate {
            signature: Some(B64.encode(bytes)),
            ..signed.clone()
        };
        assert!(matches!(
            flipped.verify(&keys),
            Err(MandateError::SignatureInvalid { .. })
        ));
        let missing = SignedMandate {
            signature: None,
            ..signed.clone()
        };
        assert_eq!(missing.verify(&keys), Err(MandateError::SignatureMissing));
        let malformed = SignedMandate {
            signature: Some("not base64!".into()),
            ..signed.clone()
        };
        assert_eq!(
            malformed.verify(&keys),
            Err(MandateError::SignatureMalformed)
        );
        let mut widened = signed.clone();
        widened.mandate.policy["daily_cap_paise"] = json!(500001);
        assert!(matches!(
            widened.verify(&keys),
            Err(MandateError::SignatureInvalid { .. })
        ));
        let mut moved = signed;
        moved.mandate.tenant = "globex".into();
        assert!(matches!(
            moved.verify(&keys),
            Err(MandateError::SignatureInvalid { .. })
        ));
    }

    #[test]
    fn a_person_without_a_configured_key_cannot_sign() {
        let keys = Keyring::empty().with("acme", "bob", world_secret("acme", "bob").public());
        let signed = mandate()
            .sign(&world_secret("acme", "alice"))
            .expect("signs");
        assert!(matches!(
            signed.verify(&keys),
            Err(MandateError::NoKey { .. })
        ));
        assert!(matches!(
            signed.verify(&Keyring::empty()),
            Err(MandateError::NoKey { .. })
        ));
    }

    #[test]
    fn key_texts_round_trip_and_refuse_the_wrong_tag() {
        let secret = world_secret("acme", "alice");
        let again = SecretKey::from_file_text(&secret.to_file_text()).expect("reads");
        assert_eq!(again.public(), secret.public());
        let public = PublicKey::from_text(&secret.public().to_text()).expect("reads");
        assert_eq!(public, secret.public());
        assert!(PublicKey::from_text(&secret.to_file_text()).is_err());
        assert!(SecretKey::from_file_text(&secret.public().to_text()).is_err());
        assert!(!format!("{secret:?}").contains(&secret.to_file_text()[SECRET_TAG.len()..]));
    }

    #[test]
    fn another_format_is_refused() {
        let mut m = mandate();
        m.format = "other".into();
        assert!(matches!(
            m.canonical_bytes(),
            Err(MandateError::Malformed(_))
        ));
    }
}
