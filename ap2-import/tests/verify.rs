//! The signature side: what is refused before a constraint is read.

mod common;

use ap2_import::{ImportError, IssuerKey, MANDATE_SIGNATURE_INVALID, UCP_PLACEHOLDER, import};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{Issuer, human, now, open_mandate};

const RANGE: &str = r#"{"type":"payment.amount_range","currency":"INR","max":5000}"#;

fn signed() -> String {
    human().token(&open_mandate(&[RANGE], None), &[])
}

fn refused(token: &str) -> ImportError {
    let e = import(token, &human().issuer_key(), now()).unwrap_err();
    assert_eq!(e.reason(), MANDATE_SIGNATURE_INVALID, "{e}");
    e
}

#[test]
fn a_signed_mandate_verifies() {
    let mapping = import(&signed(), &human().issuer_key(), now()).unwrap();
    assert_eq!(mapping.policy["per_transaction_cap_paise"], 5000);
    // A trailing newline from a file is no part of the token.
    assert!(import(&format!("{}\n", signed()), &human().issuer_key(), now()).is_ok());
}

#[test]
fn ucp_placeholder_mandate_is_refused() {
    assert_eq!(refused(UCP_PLACEHOLDER), ImportError::Placeholder);
    assert_eq!(
        refused("header.payload.signature~kb_signature\n"),
        ImportError::Placeholder
    );
    assert_eq!(
        refused("header.payload.signature~"),
        ImportError::Placeholder
    );
}

#[test]
fn bad_signature_is_refused() {
    let token = signed();
    let (jws, rest) = token.split_once('~').unwrap();
    let (input, signature) = jws.rsplit_once('.').unwrap();
    let mut bytes = URL_SAFE_NO_PAD.decode(signature).unwrap();
    bytes[10] ^= 0x01;
    let flipped = format!("{input}.{}~{rest}", URL_SAFE_NO_PAD.encode(&bytes));
    assert_eq!(refused(&flipped), ImportError::SignatureInvalid);
    // A signature of another length.
    let short = format!("{input}.{}~{rest}", URL_SAFE_NO_PAD.encode(&bytes[..63]));
    assert_eq!(refused(&short), ImportError::SignatureInvalid);
}

#[test]
fn changed_payload_is_refused() {
    // Another signed payload's body under this header and signature.
    let token = signed();
    let other = human().token(&open_mandate(&[], None), &[]);
    let mut parts: Vec<&str> = token.split('~').next().unwrap().split('.').collect();
    let other_payload = other.split('~').next().unwrap().split('.').nth(1).unwrap();
    parts[1] = other_payload;
    let spliced = format!("{}~{}", parts.join("."), token.split_once('~').unwrap().1);
    assert_eq!(refused(&spliced), ImportError::SignatureInvalid);
}

#[test]
fn wrong_key_is_refused() {
    let token = signed();
    let other = Issuer::new("intern");
    let e = import(&token, &other.issuer_key(), now()).unwrap_err();
    assert_eq!(e, ImportError::SignatureInvalid);
}

#[test]
fn wrong_alg_is_refused() {
    let mandate = open_mandate(&[RANGE], None);
    for header in [
        r#"{"alg":"none"}"#,
        r#"{"alg":"HS256"}"#,
        r#"{"alg":"ES384"}"#,
        r#"{"alg":"es256"}"#,
        r#"{"typ":"example+sd-jwt"}"#,
        r#"{"alg":["ES256"]}"#,
    ] {
        // Signed with the right key all the same: the header alone refuses.
        let token = human().token_with_header(header, &mandate, &[]);
        assert!(
            matches!(refused(&token), ImportError::AlgorithmNotAllowed(_)),
            "{header}"
        );
    }
    let crit = human().token_with_header(
        r#"{"alg":"ES256","crit":["b64"],"b64":false}"#,
        &mandate,
        &[],
    );
    assert!(matches!(refused(&crit), ImportError::Malformed(_)));
    // A key named in the header changes nothing: the caller's key verifies.
    let intruder = Issuer::new("intruder");
    let jwk_header = format!(r#"{{"alg":"ES256","jwk":{}}}"#, intruder.public_jwk());
    let token = intruder.token_with_header(&jwk_header, &mandate, &[]);
    assert_eq!(refused(&token), ImportError::SignatureInvalid);
}

#[test]
fn changed_disclosure_is_refused() {
    // The mandate's disclosure re-encoded with a higher cap: its digest is
    // not the one the issuer signed, and the signed digest goes unmatched.
    let human = human();
    let token = signed();
    let (jws, _) = token.split_once('~').unwrap();
    let (forged, _) = common::disclosure(
        "mandate-salt",
        None,
        &open_mandate(
            &[r#"{"type":"payment.amount_range","currency":"INR","max":5000000}"#],
            None,
        ),
    );
    let e = refused(&format!("{jws}~{forged}~"));
    assert!(matches!(e, ImportError::DisclosureInvalid(_)), "{e}");
    // With the signed disclosure too, the forged one is unreferenced.
    let e = refused(&format!("{token}{forged}~"));
    assert!(matches!(e, ImportError::DisclosureInvalid(_)), "{e}");
    drop(human);
}

#[test]
fn a_disclosure_given_twice_is_refused() {
    let token = signed();
    let d = token.split('~').nth(1).unwrap();
    let e = refused(&format!("{token}{d}~"));
    assert!(matches!(e, ImportError::DisclosureInvalid(_)), "{e}");
}

#[test]
fn a_disclosed_claim_may_not_replace_a_signed_one() {
    // The mandate signed with vct in the clear and an _sd digest for a
    // second vct: the disclosure clashes.
    let (vct, digest) = common::disclosure("s", Some("vct"), r#""mandate.payment.open.1""#);
    let mandate = open_mandate(&[RANGE], None);
    let mandate = format!(r#"{},"_sd":["{digest}"]}}"#, &mandate[..mandate.len() - 1]);
    let e = refused(&human().token(&mandate, &[vct]));
    assert!(matches!(e, ImportError::DisclosureInvalid(_)), "{e}");
}

#[test]
fn an_object_property_disclosure_resolves() {
    // constraints itself selectively disclosed, as an object property.
    let (constraints, digest) = common::disclosure("s", Some("constraints"), &format!("[{RANGE}]"));
    let holder = Issuer::new("agent").public_jwk();
    let mandate = format!(
        r#"{{"vct":"mandate.payment.open.1","cnf":{{"jwk":{holder}}},"_sd":["{digest}"]}}"#
    );
    let token = human().token(&mandate, &[constraints]);
    let mapping = import(&token, &human().issuer_key(), now()).unwrap();
    assert_eq!(mapping.policy["per_transaction_cap_paise"], 5000);
}

#[test]
fn key_binding_jwt_is_refused() {
    let token = signed();
    let kb = human().jws(r#"{"alg":"ES256","typ":"kb+sd-jwt"}"#, r#"{"iat":1}"#);
    assert_eq!(
        refused(&format!("{token}{kb}")),
        ImportError::KeyBindingPresent
    );
}

#[test]
fn malformed_tokens_are_refused() {
    let token = signed();
    let jws = token.split_once('~').unwrap().0;
    for text in [
        "",
        "~",
        jws,
        &format!("{jws}~~"),
        &format!("{jws}~!!~"),
        "a.b~",
        "a.b.c.d~",
        "e30.e30.e30~",
        &"A".repeat(70_000),
    ] {
        refused(text);
    }
    // A payload that is not an object, signed.
    let not_object = human().jws(r#"{"alg":"ES256"}"#, "[1]");
    refused(&format!("{not_object}~"));
    // _sd_alg other than sha-256.
    let other_alg = human().jws(
        r#"{"alg":"ES256"}"#,
        r#"{"_sd_alg":"sha-512","delegate_payload":[]}"#,
    );
    assert!(matches!(
        refused(&format!("{other_alg}~")),
        ImportError::DisclosureInvalid(_)
    ));
}

#[test]
fn not_an_open_payment_mandate_is_refused_invalid() {
    for payload in [
        r#"{"delegate_payload":[]}"#,
        r#"{"vct":"mandate.payment.open.1","constraints":[]}"#,
        r#"{"delegate_payload":[{"vct":"mandate.payment.open.1","constraints":[]}]}"#,
    ] {
        let jws = human().jws(r#"{"alg":"ES256"}"#, payload);
        let e = import(&format!("{jws}~"), &human().issuer_key(), now()).unwrap_err();
        assert!(
            matches!(e, ImportError::NotOpenPaymentMandate(_)),
            "{payload}: {e}"
        );
    }
}

#[test]
fn issuer_key_as_pem_and_as_jwk() {
    let pem = IssuerKey::parse(&human().public_pem()).unwrap();
    let jwk = IssuerKey::parse(&human().public_jwk()).unwrap();
    assert_eq!(pem, jwk);
    assert_eq!(pem, human().issuer_key());
    assert!(import(&signed(), &pem, now()).is_ok());
    for bad in [
        "",
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
        r#"{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}"#,
        r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#,
    ] {
        let e = IssuerKey::parse(bad).unwrap_err();
        assert!(matches!(e, ImportError::IssuerKeyUnreadable(_)), "{bad}");
    }
    // A JWK holding the private scalar is refused.
    let mut with_d: serde_json::Value = serde_json::from_str(&human().public_jwk()).unwrap();
    with_d["d"] = "AAAA".into();
    assert!(IssuerKey::parse(&with_d.to_string()).is_err());
    // A JWK whose point is off the curve.
    let mut off: serde_json::Value = serde_json::from_str(&human().public_jwk()).unwrap();
    off["y"] = off["x"].clone();
    assert!(IssuerKey::parse(&off.to_string()).is_err());
}

#[test]
fn claims_nested_too_deep_through_disclosures_are_refused() {
    // Each disclosure an array holding the next one's digest: 80 of them
    // nest past the 64 levels read.
    let chain = |n: usize| {
        let mut disclosures = Vec::new();
        let (mut last, mut digest) = common::disclosure("s0", None, "1");
        for i in 1..n {
            disclosures.push(last);
            (last, digest) = common::disclosure(
                &format!("s{i}"),
                None,
                &format!(r#"[{{"...":"{digest}"}}]"#),
            );
        }
        disclosures.push(last);
        let mandate = open_mandate(&[RANGE], None);
        let mandate = format!(
            r#"{},"risk_data":[{{"...":"{digest}"}}]}}"#,
            &mandate[..mandate.len() - 1]
        );
        human().token(&mandate, &disclosures)
    };
    assert!(import(&chain(5), &human().issuer_key(), now()).is_ok());
    let e = refused(&chain(80));
    assert!(matches!(e, ImportError::DisclosureInvalid(_)), "{e}");
}

#[test]
fn every_single_character_change_is_refused() {
    // The payee is a disclosure inside the disclosed mandate, so the
    // token has a JWS, two disclosures and their separators.
    let (payee, digest) = common::disclosure("p", None, r#"{"id":"cloudco","name":"Cloud"}"#);
    let mandate = open_mandate(
        &[&format!(
            r#"{{"type":"payment.allowed_payees","allowed":[{{"...":"{digest}"}}]}}"#
        )],
        None,
    );
    let token = human().token(&mandate, &[payee]);
    let key = human().issuer_key();
    assert!(import(&token, &key, now()).is_ok());
    let mut accepted = Vec::new();
    for (i, c) in token.char_indices() {
        let other = if c == 'A' { 'B' } else { 'A' };
        let changed = format!("{}{other}{}", &token[..i], &token[i + 1..]);
        if import(&changed, &key, now()).is_ok() {
            accepted.push(i);
        }
    }
    assert!(
        accepted.is_empty(),
        "changes at {accepted:?} of {} were accepted",
        token.len()
    );
    // The token tried is the whole of it: 751 characters.
    assert_eq!(token.len(), 751);
}
