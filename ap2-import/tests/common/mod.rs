//! Test vectors made here: ES256 keys derived from a seed, and AP2 open
//! payment mandates signed with them the way AP2's SDK issues one (the
//! mandate a disclosed element of `delegate_payload`, `_sd_alg` sha-256).
//! JSON is written as text, so a number is signed exactly as a test
//! writes it.

#![allow(dead_code)]

use ap2_import::{ImportError, IssuerKey, Mapping};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::{EncodePublicKey, LineEnding};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The standard world's instant.
pub fn now() -> DateTime<Utc> {
    "2026-09-03T10:00:00Z".parse().unwrap()
}

/// A human's ES256 key: the P-256 secret scalar is the SHA-256 of
/// `ap2-import-test:<seed>`.
pub struct Issuer {
    pub key: SigningKey,
}

impl Issuer {
    pub fn new(seed: &str) -> Issuer {
        let secret: [u8; 32] = Sha256::digest(format!("ap2-import-test:{seed}")).into();
        Issuer {
            key: SigningKey::from_slice(&secret).unwrap(),
        }
    }

    pub fn issuer_key(&self) -> IssuerKey {
        IssuerKey::from_verifying_key(*self.key.verifying_key())
    }

    pub fn public_pem(&self) -> String {
        self.key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap()
    }

    pub fn public_jwk(&self) -> String {
        let point = self.key.verifying_key().to_sec1_point(false);
        let bytes = point.as_bytes();
        json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&bytes[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&bytes[33..65]),
        })
        .to_string()
    }

    /// A compact JWS over the given header and payload texts.
    pub fn jws(&self, header: &str, payload: &str) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        );
        let signature: Signature = self.key.sign(input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }

    /// The SD-JWT of `mandate` (a JSON object's text), with `extra`
    /// disclosures (already encoded) after the mandate's own.
    pub fn token(&self, mandate: &str, extra: &[String]) -> String {
        self.token_with_header(r#"{"alg":"ES256","typ":"example+sd-jwt"}"#, mandate, extra)
    }

    pub fn token_with_header(&self, header: &str, mandate: &str, extra: &[String]) -> String {
        let (disclosed, digest) = disclosure("mandate-salt", None, mandate);
        let payload =
            format!(r#"{{"delegate_payload":[{{"...":"{digest}"}}],"_sd_alg":"sha-256"}}"#);
        let mut token = self.jws(header, &payload);
        for d in std::iter::once(&disclosed).chain(extra) {
            token.push('~');
            token.push_str(d);
        }
        token.push('~');
        token
    }
}

/// A disclosure (encoded) and its digest: `[salt, value]` for an array
/// element, `[salt, name, value]` for an object property. `value` is JSON
/// text.
pub fn disclosure(salt: &str, name: Option<&str>, value: &str) -> (String, String) {
    let text = match name {
        Some(name) => format!(r#"["{salt}","{name}",{value}]"#),
        None => format!(r#"["{salt}",{value}]"#),
    };
    let encoded = URL_SAFE_NO_PAD.encode(text);
    let digest = URL_SAFE_NO_PAD.encode(Sha256::digest(encoded.as_bytes()));
    (encoded, digest)
}

/// An open payment mandate's text with these constraints (each a JSON
/// object's text) and `exp` when given.
pub fn open_mandate(constraints: &[&str], exp: Option<i64>) -> String {
    let holder = Issuer::new("agent").public_jwk();
    let exp = exp.map(|e| format!(r#","exp":{e}"#)).unwrap_or_default();
    format!(
        r#"{{"vct":"mandate.payment.open.1","constraints":[{}],"cnf":{{"jwk":{holder}}},"iat":1788000000{exp}}}"#,
        constraints.join(",")
    )
}

/// The human who signs in these tests.
pub fn human() -> Issuer {
    Issuer::new("finance-lead")
}

/// Imports a mandate with these constraints, signed by [`human`], at [`now`].
pub fn import(constraints: &[&str]) -> Result<Mapping, ImportError> {
    let token = human().token(&open_mandate(constraints, None), &[]);
    ap2_import::import(&token, &human().issuer_key(), now())
}

/// The standard world's policy of `acme`, as a policy document.
pub fn standard_policy() -> Map<String, Value> {
    let Value::Object(map) = json!({
        "currency": "INR",
        "per_transaction_cap_paise": 300000,
        "daily_cap_paise": 500000,
        "approval_threshold_paise": 100000,
        "allowed_merchants": ["cloudco", "snackshop"],
        "allowed_categories": ["cloud-credits", "food"],
        "valid_from": "2026-01-01T00:00:00Z",
        "valid_until": "2026-12-31T23:59:59Z",
        "velocity": {"max_proposals": 20, "window_minutes": 60},
        "denial_rate": {"max_denials": 5, "window_minutes": 60}
    }) else {
        unreachable!()
    };
    map
}

/// The mapped keys as JSON, for comparing whole.
pub fn keys(mapping: &Mapping) -> Value {
    Value::Object(mapping.policy.clone())
}
