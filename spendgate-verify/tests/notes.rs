//! Signed notes: the known answers of the Go reference and the C2SP
//! specification, and every way a note or a key is refused.

use std::path::Path;

use serde_json::Value;
use spendgate_verify::note::{self, Note, NoteError, SignerKey, VerifierKey};

fn known_answers() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/signed-note/known-answer.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap()
}

struct Go {
    signer: String,
    vkey: String,
    other_vkey: String,
    text: String,
    sig: String,
    other_sig: String,
}

fn go() -> Go {
    let all = known_answers();
    let v = &all["golang_mod_sumdb_note"];
    Go {
        signer: s(&v["signer_key"]).into(),
        vkey: s(&v["verifier_key"]).into(),
        other_vkey: s(&v["other_verifier_key"]).into(),
        text: s(&v["text"]).into(),
        sig: s(&v["signature_line"]).into(),
        other_sig: s(&v["other_signature_line"]).into(),
    }
}

fn vk(text: &str) -> VerifierKey {
    VerifierKey::parse(text).unwrap()
}

#[test]
fn signing_reproduces_the_go_reference_note_byte_for_byte() {
    let g = go();
    let signer = SignerKey::parse(&g.signer).unwrap();
    assert_eq!(signer.verifier().to_text(), g.vkey);
    let signed = note::sign(&g.text, &[&signer]).unwrap();
    assert_eq!(signed, format!("{}\n{}", g.text, g.sig));
}

#[test]
fn the_go_reference_note_verifies_under_its_key() {
    let g = go();
    let msg = format!("{}\n{}", g.text, g.sig);
    let opened = note::open(msg.as_bytes(), &[vk(&g.vkey)]).unwrap();
    assert_eq!(opened.text, g.text);
    assert_eq!(opened.verified_by, vec!["PeterNeumann".to_owned()]);
}

#[test]
fn the_c2sp_specification_example_verifies() {
    let all = known_answers();
    let v = &all["c2sp_signed_note_example"];
    let opened = note::open(s(&v["note"]).as_bytes(), &[vk(s(&v["verifier_key"]))]).unwrap();
    assert_eq!(opened.text, "This is an example message.\n");
}

#[test]
fn a_signature_by_an_unknown_key_is_ignored_and_a_known_one_still_counts() {
    let g = go();
    let msg = format!("{}\n{}{}", g.text, g.sig, g.other_sig);
    let by_peter = note::open(msg.as_bytes(), &[vk(&g.vkey)]).unwrap();
    assert_eq!(by_peter.verified_by, vec!["PeterNeumann".to_owned()]);
    let by_enoch = note::open(msg.as_bytes(), &[vk(&g.other_vkey)]).unwrap();
    assert_eq!(by_enoch.verified_by, vec!["EnochRoot".to_owned()]);
}

#[test]
fn a_note_signed_only_by_another_key_is_refused() {
    let g = go();
    let msg = format!("{}\n{}", g.text, g.sig);
    let err = note::open(msg.as_bytes(), &[vk(&g.other_vkey)]).unwrap_err();
    assert_eq!(
        err,
        NoteError::NoTrustedSignature {
            expected: "EnochRoot+af0cfe78".into(),
            found: "PeterNeumann+c74f20a3".into(),
        }
    );
}

#[test]
fn a_bad_signature_under_a_trusted_name_and_id_refuses_the_whole_note() {
    let g = go();
    let signer = SignerKey::parse(&g.signer).unwrap();
    // A valid signature by Peter over another text, put under this text.
    let other = note::sign("another text\n", &[&signer]).unwrap();
    let stolen = other.split_once("\n\n").unwrap().1;
    let msg = format!("{}\n{}{}", g.text, g.sig, stolen);
    assert_eq!(
        note::open(msg.as_bytes(), &[vk(&g.vkey)]),
        Err(NoteError::BadSignature {
            name: "PeterNeumann".into(),
            id: 0xc74f20a3
        })
    );
}

/// Every single-byte change and every single-byte deletion of a signed note
/// is refused.
#[test]
fn any_byte_changed_or_removed_anywhere_in_a_note_is_refused() {
    let g = go();
    let msg = format!("{}\n{}", g.text, g.sig).into_bytes();
    let keys = [vk(&g.vkey)];
    assert!(note::open(&msg, &keys).is_ok());
    let mut tried = 0;
    for i in 0..msg.len() {
        for flip in [0x01u8, 0x80] {
            let mut bad = msg.clone();
            bad[i] ^= flip;
            assert!(
                note::open(&bad, &keys).is_err(),
                "byte {i} xor {flip:#x} accepted"
            );
            tried += 1;
        }
        let mut cut = msg.clone();
        cut.remove(i);
        assert!(
            note::open(&cut, &keys).is_err(),
            "byte {i} removed accepted"
        );
        tried += 1;
    }
    assert_eq!(tried, msg.len() * 3);
}

#[test]
fn malformed_notes_are_refused_with_a_named_reason() {
    let g = go();
    let (text, sig) = (g.text.as_str(), g.sig.as_str());
    let cases: Vec<(String, NoteError)> = vec![
        (text.to_owned(), NoteError::NoSignatureBlock),
        (format!("{text}\n"), NoteError::NoSignatureBlock),
        (
            format!("{text}\n{}", &sig[..sig.len() - 1]),
            NoteError::MissingFinalNewline,
        ),
        (
            format!("\x01{text}\n{sig}"),
            NoteError::ControlCharacter { byte: 1, offset: 0 },
        ),
        (
            format!("{text}\n{}", sig.replacen("PeterNeumann", "Bad Name", 1)),
            NoteError::MalformedSignatureLine {
                line: 1,
                why: "the key name is empty or has a space or a plus",
            },
        ),
        (
            format!("{text}\n{sig}Unexpected line.\n"),
            NoteError::MalformedSignatureLine {
                line: 2,
                why: "it does not start with an em dash and a space",
            },
        ),
        (
            format!("{text}\n{}", sig.replacen("\u{2014}", "-", 1)),
            NoteError::MalformedSignatureLine {
                line: 1,
                why: "it does not start with an em dash and a space",
            },
        ),
        (
            format!("{text}\n\u{2014} PeterNeumann\n"),
            NoteError::MalformedSignatureLine {
                line: 1,
                why: "no space between key name and signature",
            },
        ),
        (
            format!("{text}\n\u{2014} PeterNeumann AAAA\n"),
            NoteError::MalformedSignatureLine {
                line: 1,
                why: "the signature is shorter than a key id and one byte",
            },
        ),
        (
            format!("{text}\n\u{2014} PeterNeumann x08go/ZJ!\n"),
            NoteError::MalformedSignatureLine {
                line: 1,
                why: "the signature is not canonical base64",
            },
        ),
        (
            format!("{text}\n{}", sig.repeat(note::MAX_SIGNATURES + 1)),
            NoteError::TooManySignatures {
                got: note::MAX_SIGNATURES + 1,
                max: note::MAX_SIGNATURES,
            },
        ),
    ];
    for (msg, want) in cases {
        assert_eq!(Note::parse(msg.as_bytes()), Err(want), "{msg:?}");
    }
    let mut not_utf8 = b"\xff".to_vec();
    not_utf8.extend_from_slice(format!("{text}\n{sig}").as_bytes());
    assert_eq!(Note::parse(&not_utf8), Err(NoteError::NotUtf8));
}

/// The Go reference's verifier-key manglings: every proper substring and
/// every single-byte increment of a key is refused.
#[test]
fn every_mangled_verifier_key_is_refused() {
    let g = go();
    let b = g.vkey.as_bytes();
    let mut refused = 0;
    for i in 0..=b.len() {
        for j in i + 1..=b.len() {
            if i == 0 && j == b.len() {
                continue;
            }
            let k = String::from_utf8_lossy(&b[i..j]);
            assert!(VerifierKey::parse(&k).is_err(), "{k}");
            refused += 1;
        }
    }
    for i in 0..b.len() {
        let mut m = b.to_vec();
        m[i] = m[i].wrapping_add(1);
        let k = String::from_utf8_lossy(&m);
        assert!(VerifierKey::parse(&k).is_err(), "{k}");
        refused += 1;
    }
    println!("{refused} mangled verifier keys refused");
    // Wrong key length and unknown algorithm, each with an adjusted key id.
    // The first one's padding carries non-zero bits, which strict base64
    // refuses before its length is looked at.
    assert_eq!(
        VerifierKey::parse(
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=="
        ),
        Err(NoteError::MalformedVerifierKey("the key is not base64"))
    );
    assert_eq!(
        VerifierKey::parse(
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEQ=="
        ),
        Err(NoteError::MalformedVerifierKey(
            "an Ed25519 key is 32 bytes"
        ))
    );
    assert_eq!(
        VerifierKey::parse("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"),
        Err(NoteError::MalformedVerifierKey(
            "the key is not of type 0x01 (Ed25519)"
        ))
    );
    assert_eq!(
        VerifierKey::parse("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"),
        Err(NoteError::KeyIdMismatch {
            stated: 0xc74f20a4,
            computed: 0xc74f20a3
        })
    );
}

#[test]
fn text_that_cannot_be_a_note_is_not_signed() {
    let signer = SignerKey::from_seed("example.test/log", &[7; 32]).unwrap();
    for text in ["", "no newline", "tab\there\n"] {
        assert_eq!(note::sign(text, &[&signer]), Err(NoteError::BadText));
    }
    assert_eq!(
        SignerKey::from_seed("a name", &[7; 32]).map(|_| ()),
        Err(NoteError::BadKeyName("a name".into()))
    );
}
