//! The issuer-signed SD-JWT (RFC 9901) an AP2 mandate travels in, verified
//! under the issuer's P-256 key.
//!
//! Guarantees: nothing of the token is read as a claim before its ES256
//! signature verifies under the key the caller holds; the header's `alg`
//! must be exactly `ES256` (no `none`, no HMAC, no other curve, no key
//! named by the token itself); a header with `crit` is refused. Every
//! disclosure must be referenced by exactly one digest the signed payload
//! (or a disclosure it reaches) carries, and a disclosed claim may not
//! replace one already there; an array element whose digest has no
//! disclosure is left out (the holder withheld it). `_sd_alg` must be
//! absent or `sha-256`. A key-binding JWT after the SD-JWT is refused: the
//! import takes what the human signed, nothing a holder added.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::DecodePublicKey;
use sha2::{Digest, Sha256};

use crate::error::ImportError;
use crate::json::Json;

/// UCP's conformance suite sends this as an AP2 mandate and expects the
/// checkout to complete.
pub const UCP_PLACEHOLDER: &str = "header.payload.signature~kb_signature";

/// The longest token read: 64 KiB.
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// The issuer's (the human's) P-256 public key, the one key a mandate is
/// verified under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerKey(VerifyingKey);

impl IssuerKey {
    /// Reads an SPKI PEM (`-----BEGIN PUBLIC KEY-----`) or an EC JWK
    /// (`{"kty": "EC", "crv": "P-256", "x": .., "y": ..}`), by its first
    /// non-blank character.
    pub fn parse(text: &str) -> Result<IssuerKey, ImportError> {
        let text = text.trim();
        if text.starts_with('{') {
            IssuerKey::from_jwk(text)
        } else {
            IssuerKey::from_pem(text)
        }
    }

    /// An SPKI PEM of a P-256 key.
    pub fn from_pem(pem: &str) -> Result<IssuerKey, ImportError> {
        VerifyingKey::from_public_key_pem(pem.trim())
            .map(IssuerKey)
            .map_err(|e| ImportError::IssuerKeyUnreadable(format!("PEM: {e}")))
    }

    /// An EC JWK of a P-256 key; a private member (`d`) is refused, so a
    /// secret key is never taken for the public one.
    pub fn from_jwk(jwk: &str) -> Result<IssuerKey, ImportError> {
        let bad = |why: &str| ImportError::IssuerKeyUnreadable(format!("JWK: {why}"));
        let json = Json::parse(jwk).map_err(|e| bad(&e))?;
        let member = |name: &str| json.get(name).and_then(Json::as_str);
        if member("kty") != Some("EC") || member("crv") != Some("P-256") {
            return Err(bad("kty must be EC and crv P-256"));
        }
        if json.get("d").is_some() {
            return Err(bad("it holds a private key (d); give the public key alone"));
        }
        if let Some(alg) = member("alg")
            && alg != "ES256"
        {
            return Err(bad("alg must be ES256"));
        }
        let coordinate = |name: &str| {
            member(name)
                .and_then(|c| URL_SAFE_NO_PAD.decode(c).ok())
                .filter(|c| c.len() == 32)
                .ok_or_else(|| bad(&format!("{name} must be 32 bytes of base64url")))
        };
        let mut point = vec![0x04];
        point.extend(coordinate("x")?);
        point.extend(coordinate("y")?);
        VerifyingKey::from_sec1_bytes(&point)
            .map(IssuerKey)
            .map_err(|_| bad("x, y is not a point of P-256"))
    }

    /// Wraps a key already held.
    pub fn from_verifying_key(key: VerifyingKey) -> IssuerKey {
        IssuerKey(key)
    }
}

/// The token's issuer-signed payload with every disclosure put in place,
/// once its signature verifies under `key`.
pub(crate) fn verify(token: &str, key: &IssuerKey) -> Result<Json, ImportError> {
    let parts = split(token)?;
    verify_signature(&parts, key)?;
    resolve(&parts)
}

/// A compact SD-JWT taken apart, not yet trusted.
pub(crate) struct Parts<'a> {
    header: &'a str,
    payload: &'a str,
    signature: &'a str,
    disclosures: Vec<&'a str>,
}

pub(crate) fn split(token: &str) -> Result<Parts<'_>, ImportError> {
    let token = token.trim_matches(|c: char| c.is_ascii_whitespace());
    if token == UCP_PLACEHOLDER || token.starts_with("header.payload.signature~") {
        return Err(ImportError::Placeholder);
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(ImportError::Malformed(format!(
            "longer than {MAX_TOKEN_BYTES} bytes"
        )));
    }
    let segments: Vec<&str> = token.split('~').collect();
    let Some((last, rest)) = segments.split_last() else {
        return Err(ImportError::Malformed("empty".into()));
    };
    if rest.is_empty() {
        return Err(ImportError::Malformed(
            "no `~`: an SD-JWT is the issuer-signed JWT, its disclosures, each followed by `~`"
                .into(),
        ));
    }
    if !last.is_empty() {
        return Err(if last.split('.').count() == 3 {
            ImportError::KeyBindingPresent
        } else {
            ImportError::Malformed("the token does not end in `~`".into())
        });
    }
    let (jws, disclosures) = (rest[0], &rest[1..]);
    if disclosures.iter().any(|d| d.is_empty()) {
        return Err(ImportError::Malformed("an empty disclosure".into()));
    }
    let jws_parts: Vec<&str> = jws.split('.').collect();
    let [header, payload, signature] = jws_parts[..] else {
        return Err(ImportError::Malformed(
            "the issuer-signed JWT is not header.payload.signature".into(),
        ));
    };
    Ok(Parts {
        header,
        payload,
        signature,
        disclosures: disclosures.to_vec(),
    })
}

fn b64(segment: &str, what: &str) -> Result<Vec<u8>, ImportError> {
    URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| ImportError::Malformed(format!("the {what} is not base64url")))
}

fn json_segment(segment: &str, what: &str) -> Result<Json, ImportError> {
    let bytes = b64(segment, what)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| ImportError::Malformed(format!("the {what} is not UTF-8")))?;
    Json::parse(text).map_err(|e| ImportError::Malformed(format!("the {what}: {e}")))
}

fn verify_signature(parts: &Parts<'_>, key: &IssuerKey) -> Result<(), ImportError> {
    let header = json_segment(parts.header, "JWS header")?;
    if !matches!(header, Json::Object(_)) {
        return Err(ImportError::Malformed(
            "the JWS header is not an object".into(),
        ));
    }
    match header.get("alg") {
        Some(Json::String(alg)) if alg == "ES256" => {}
        Some(other) => return Err(ImportError::AlgorithmNotAllowed(other.shown())),
        None => return Err(ImportError::AlgorithmNotAllowed("missing".into())),
    }
    if header.get("crit").is_some() {
        return Err(ImportError::Malformed(
            "the JWS header names critical extensions (crit) this reader does not implement".into(),
        ));
    }
    let signature = b64(parts.signature, "JWS signature")?;
    let signature = Signature::from_slice(&signature).map_err(|_| ImportError::SignatureInvalid)?;
    let signing_input = format!("{}.{}", parts.header, parts.payload);
    key.0
        .verify(signing_input.as_bytes(), &signature)
        .map_err(|_| ImportError::SignatureInvalid)
}

/// The payload with its disclosures in place. Only for a token whose
/// signature has verified, or for a test that reads a sample whose issuer
/// key is not published.
pub(crate) fn resolve(parts: &Parts<'_>) -> Result<Json, ImportError> {
    let payload = json_segment(parts.payload, "JWS payload")?;
    let Json::Object(members) = payload else {
        return Err(ImportError::Malformed(
            "the JWS payload is not an object".into(),
        ));
    };
    match members.iter().find(|(k, _)| k == "_sd_alg").map(|(_, v)| v) {
        None => {}
        Some(Json::String(alg)) if alg == "sha-256" => {}
        Some(other) => {
            return Err(ImportError::DisclosureInvalid(format!(
                "_sd_alg {} (only sha-256 is read)",
                other.shown()
            )));
        }
    }
    let mut table = Disclosures::read(&parts.disclosures)?;
    let members = members
        .into_iter()
        .filter(|(k, _)| k != "_sd_alg")
        .collect();
    let resolved = table.value(Json::Object(members))?;
    if let Some(unused) = table.entries.iter().find(|d| !d.used) {
        return Err(ImportError::DisclosureInvalid(format!(
            "disclosure {} is referenced by no digest the issuer signed",
            unused.digest
        )));
    }
    Ok(resolved)
}

struct Disclosure {
    digest: String,
    /// Present for an object property, absent for an array element.
    name: Option<String>,
    value: Json,
    used: bool,
}

struct Disclosures {
    entries: Vec<Disclosure>,
    /// The digests met so far, each at most once.
    seen: Vec<String>,
    /// How many objects and arrays deep the resolution is, disclosed
    /// values included.
    depth: usize,
}

impl Disclosures {
    fn read(texts: &[&str]) -> Result<Disclosures, ImportError> {
        let mut entries: Vec<Disclosure> = Vec::new();
        for text in texts {
            let digest = URL_SAFE_NO_PAD.encode(Sha256::digest(text.as_bytes()));
            if entries.iter().any(|d| d.digest == digest) {
                return Err(ImportError::DisclosureInvalid(format!(
                    "disclosure {digest} is given twice"
                )));
            }
            let bad = |why: &str| ImportError::DisclosureInvalid(format!("{digest}: {why}"));
            let json = json_segment(text, "disclosure").map_err(|e| bad(&e.to_string()))?;
            let Json::Array(items) = json else {
                return Err(bad("not an array"));
            };
            let (name, value) = match <[Json; 3]>::try_from(items) {
                Ok([Json::String(_salt), Json::String(name), value]) => (Some(name), value),
                Ok(_) => return Err(bad("not [salt, name, value]")),
                Err(items) => match <[Json; 2]>::try_from(items) {
                    Ok([Json::String(_salt), value]) => (None, value),
                    _ => return Err(bad("neither [salt, name, value] nor [salt, value]")),
                },
            };
            if matches!(name.as_deref(), Some("_sd" | "..." | "_sd_alg")) {
                return Err(bad("a disclosure may not name _sd, ... or _sd_alg"));
            }
            entries.push(Disclosure {
                digest,
                name,
                value,
                used: false,
            });
        }
        Ok(Disclosures {
            entries,
            seen: Vec::new(),
            depth: 0,
        })
    }

    /// The disclosure for `digest`, marked used; a digest met twice is
    /// refused.
    fn take(&mut self, digest: &str) -> Result<Option<(Option<String>, Json)>, ImportError> {
        if self.seen.iter().any(|d| d == digest) {
            return Err(ImportError::DisclosureInvalid(format!(
                "digest {digest} appears twice"
            )));
        }
        self.seen.push(digest.to_owned());
        Ok(self
            .entries
            .iter_mut()
            .find(|d| d.digest == digest)
            .map(|d| {
                d.used = true;
                (d.name.clone(), d.value.clone())
            }))
    }

    fn value(&mut self, value: Json) -> Result<Json, ImportError> {
        if !matches!(value, Json::Object(_) | Json::Array(_)) {
            return Ok(value);
        }
        if self.depth >= crate::json::MAX_DEPTH {
            return Err(ImportError::DisclosureInvalid(format!(
                "claims nested deeper than {} levels",
                crate::json::MAX_DEPTH
            )));
        }
        self.depth += 1;
        let resolved = match value {
            Json::Object(members) => self.object(members),
            Json::Array(items) => self.array(items),
            other => Ok(other),
        };
        self.depth -= 1;
        resolved
    }

    fn object(&mut self, members: Vec<(String, Json)>) -> Result<Json, ImportError> {
        let mut out: Vec<(String, Json)> = Vec::new();
        let mut digests: Vec<Json> = Vec::new();
        for (key, value) in members {
            if key == "_sd" {
                let Json::Array(list) = value else {
                    return Err(ImportError::DisclosureInvalid("_sd is not an array".into()));
                };
                digests = list;
            } else {
                let value = self.value(value)?;
                out.push((key, value));
            }
        }
        for digest in digests {
            let Json::String(digest) = digest else {
                return Err(ImportError::DisclosureInvalid(
                    "a digest in _sd is not a string".into(),
                ));
            };
            let Some((name, value)) = self.take(&digest)? else {
                continue;
            };
            let Some(name) = name else {
                return Err(ImportError::DisclosureInvalid(format!(
                    "{digest}: an array element's disclosure is referenced from an object"
                )));
            };
            if out.iter().any(|(k, _)| *k == name) {
                return Err(ImportError::DisclosureInvalid(format!(
                    "{digest}: the disclosed claim {name:?} is already there"
                )));
            }
            let value = self.value(value)?;
            out.push((name, value));
        }
        Ok(Json::Object(out))
    }

    fn array(&mut self, items: Vec<Json>) -> Result<Json, ImportError> {
        let mut out = Vec::new();
        for item in items {
            let digest = match &item {
                Json::Object(members) if members.iter().any(|(k, _)| k == "...") => {
                    match &members[..] {
                        [(_, Json::String(d))] => Some(d.clone()),
                        _ => {
                            return Err(ImportError::DisclosureInvalid(
                                "an array element with `...` must hold that digest alone".into(),
                            ));
                        }
                    }
                }
                _ => None,
            };
            match digest {
                None => out.push(self.value(item)?),
                Some(digest) => match self.take(&digest)? {
                    None => {}
                    Some((Some(_), _)) => {
                        return Err(ImportError::DisclosureInvalid(format!(
                            "{digest}: an object property's disclosure is referenced from an array"
                        )));
                    }
                    Some((None, value)) => out.push(self.value(value)?),
                },
            }
        }
        Ok(Json::Array(out))
    }
}
