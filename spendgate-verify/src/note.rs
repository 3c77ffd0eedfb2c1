//! C2SP signed notes (`c2sp.org/signed-note`) with Ed25519 keys.
//!
//! Guarantees:
//! - A note is accepted only if it is valid UTF-8 with no control character
//!   but newline, its text ends in a newline and is followed by one blank
//!   line and well-formed signature lines (`— <name> <base64(key id ||
//!   signature)>`), and at least one signature is by a key the caller
//!   trusts and verifies (RFC 8032, strict: no malleable or small-order
//!   forms). Anything else is refused with a named [`NoteError`].
//! - Signatures by unknown keys (another name or another key id) are
//!   ignored, as the specification requires; a signature whose name and key
//!   id match a trusted key but that does not verify refuses the whole note.
//! - Key ids are `SHA-256(name || 0x0A || 0x01 || public key)[:4]`; verifier
//!   keys are `name+hex(key id)+base64(0x01 || public key)`, and a verifier
//!   key whose id does not match its name and key is refused.
//! - Signing produces exactly the bytes the Go reference
//!   (`golang.org/x/mod/sumdb/note`) produces (the known-answer vector in
//!   `tests/notes.rs`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// The signature type byte of plain Ed25519 signed-note signatures.
pub const ED25519: u8 = 0x01;

/// The most signature lines a note may carry (the specification asks
/// verifiers to accept at least 16).
pub const MAX_SIGNATURES: usize = 100;

/// The prefix of every signature line: an em dash and a space.
const SIG_PREFIX: &str = "\u{2014} ";

/// Why a note or a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("the note is not valid UTF-8")]
    NotUtf8,
    #[error("the note contains the control character {byte:#04x} at byte {offset}")]
    ControlCharacter { byte: u8, offset: usize },
    #[error("the note does not end in a newline")]
    MissingFinalNewline,
    #[error("the note has no blank line before its signatures")]
    NoSignatureBlock,
    #[error("signature line {line} is malformed: {why}")]
    MalformedSignatureLine { line: usize, why: &'static str },
    #[error("the note has {got} signatures, more than the {max} accepted")]
    TooManySignatures { got: usize, max: usize },
    #[error("the signature by {name} ({id:08x}) does not verify")]
    BadSignature { name: String, id: u32 },
    #[error("no signature by a trusted key ({expected}); signed by: {found}")]
    NoTrustedSignature { expected: String, found: String },
    #[error("the key name {0:?} is empty or contains a space or a plus")]
    BadKeyName(String),
    #[error("the verifier key is malformed: {0}")]
    MalformedVerifierKey(&'static str),
    #[error("the signer key is malformed: {0}")]
    MalformedSignerKey(&'static str),
    #[error("the key's id {stated:08x} is not its computed id {computed:08x}")]
    KeyIdMismatch { stated: u32, computed: u32 },
    #[error("the note text is empty or does not end in a newline")]
    BadText,
}

fn valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+')
}

/// The key id of an Ed25519 key: `SHA-256(name || 0x0A || 0x01 || key)[:4]`.
pub fn key_id(name: &str, public_key: &[u8; 32]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', ED25519]);
    h.update(public_key);
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// A trusted Ed25519 public key with its name and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierKey {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl VerifierKey {
    /// Parses `name+hex(key id)+base64(0x01 || public key)`.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        let mut parts = text.splitn(3, '+');
        let (Some(name), Some(id_hex), Some(key_b64)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(NoteError::MalformedVerifierKey("expected name+keyid+key"));
        };
        if !valid_key_name(name) {
            return Err(NoteError::BadKeyName(name.to_owned()));
        }
        let stated = parse_key_id(id_hex).ok_or(NoteError::MalformedVerifierKey(
            "the key id is not 8 lowercase hex digits",
        ))?;
        let raw = STANDARD
            .decode(key_b64)
            .map_err(|_| NoteError::MalformedVerifierKey("the key is not base64"))?;
        let Some((&ED25519, public)) = raw.split_first() else {
            return Err(NoteError::MalformedVerifierKey(
                "the key is not of type 0x01 (Ed25519)",
            ));
        };
        let public: [u8; 32] = public
            .try_into()
            .map_err(|_| NoteError::MalformedVerifierKey("an Ed25519 key is 32 bytes"))?;
        let computed = key_id(name, &public);
        if computed != stated {
            return Err(NoteError::KeyIdMismatch { stated, computed });
        }
        let key = VerifyingKey::from_bytes(&public)
            .map_err(|_| NoteError::MalformedVerifierKey("not an Ed25519 point"))?;
        Ok(Self {
            name: name.to_owned(),
            id: stated,
            key,
        })
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key's 4-byte id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The verifier key text, `name+hex(key id)+base64(0x01 || key)`.
    pub fn to_text(&self) -> String {
        let mut raw = vec![ED25519];
        raw.extend_from_slice(self.key.as_bytes());
        format!("{}+{:08x}+{}", self.name, self.id, STANDARD.encode(raw))
    }
}

fn parse_key_id(hex: &str) -> Option<u32> {
    if hex.len() != 8
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// An Ed25519 signing key with its name and id.
#[derive(Debug, Clone)]
pub struct SignerKey {
    name: String,
    id: u32,
    key: SigningKey,
}

impl SignerKey {
    /// A signer from a name and a 32-byte Ed25519 seed.
    pub fn from_seed(name: &str, seed: &[u8; 32]) -> Result<Self, NoteError> {
        if !valid_key_name(name) {
            return Err(NoteError::BadKeyName(name.to_owned()));
        }
        let key = SigningKey::from_bytes(seed);
        Ok(Self {
            name: name.to_owned(),
            id: key_id(name, key.verifying_key().as_bytes()),
            key,
        })
    }

    /// Parses the Go reference's signer key text,
    /// `PRIVATE+KEY+name+hex(key id)+base64(0x01 || seed)`.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        let rest = text
            .strip_prefix("PRIVATE+KEY+")
            .ok_or(NoteError::MalformedSignerKey("no PRIVATE+KEY+ prefix"))?;
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(id_hex), Some(key_b64)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(NoteError::MalformedSignerKey("expected name+keyid+key"));
        };
        let stated = parse_key_id(id_hex).ok_or(NoteError::MalformedSignerKey(
            "the key id is not 8 lowercase hex digits",
        ))?;
        let raw = STANDARD
            .decode(key_b64)
            .map_err(|_| NoteError::MalformedSignerKey("the key is not base64"))?;
        let Some((&ED25519, seed)) = raw.split_first() else {
            return Err(NoteError::MalformedSignerKey(
                "the key is not of type 0x01 (Ed25519)",
            ));
        };
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| NoteError::MalformedSignerKey("an Ed25519 seed is 32 bytes"))?;
        let signer = Self::from_seed(name, &seed)?;
        if signer.id != stated {
            return Err(NoteError::KeyIdMismatch {
                stated,
                computed: signer.id,
            });
        }
        Ok(signer)
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The public half, as a [`VerifierKey`].
    pub fn verifier(&self) -> VerifierKey {
        VerifierKey {
            name: self.name.clone(),
            id: self.id,
            key: self.key.verifying_key(),
        }
    }

    /// The signature line (without its newline) of this key over `text`.
    fn signature_line(&self, text: &str) -> String {
        let sig: Signature = self.key.sign(text.as_bytes());
        let mut raw = self.id.to_be_bytes().to_vec();
        raw.extend_from_slice(&sig.to_bytes());
        format!("{SIG_PREFIX}{} {}", self.name, STANDARD.encode(raw))
    }
}

/// One signature line of a note, parsed but not verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLine {
    pub name: String,
    pub id: u32,
    pub signature: Vec<u8>,
}

/// A note split into its text and its signature lines, not yet verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    text: String,
    signatures: Vec<SignatureLine>,
}

/// A note at least one trusted key verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedNote {
    /// The signed text, ending in a newline.
    pub text: String,
    /// The names of the trusted keys whose signatures verified.
    pub verified_by: Vec<String>,
}

impl Note {
    /// Splits a note into text and signature lines, refusing any malformed
    /// byte; the signatures are not verified here.
    pub fn parse(bytes: &[u8]) -> Result<Self, NoteError> {
        let s = std::str::from_utf8(bytes).map_err(|_| NoteError::NotUtf8)?;
        if let Some((offset, byte)) = s.bytes().enumerate().find(|&(_, b)| b < 0x20 && b != b'\n') {
            return Err(NoteError::ControlCharacter { byte, offset });
        }
        if !s.ends_with('\n') {
            return Err(NoteError::MissingFinalNewline);
        }
        let split = s.rfind("\n\n").ok_or(NoteError::NoSignatureBlock)?;
        let text = &s[..=split];
        let block = &s[split + 2..];
        let count = block.split_terminator('\n').count();
        if count > MAX_SIGNATURES {
            return Err(NoteError::TooManySignatures {
                got: count,
                max: MAX_SIGNATURES,
            });
        }
        let mut signatures = Vec::with_capacity(count);
        for (i, line) in block.split_terminator('\n').enumerate() {
            signatures.push(
                parse_signature_line(line)
                    .map_err(|why| NoteError::MalformedSignatureLine { line: i + 1, why })?,
            );
        }
        if signatures.is_empty() {
            return Err(NoteError::NoSignatureBlock);
        }
        Ok(Self {
            text: text.to_owned(),
            signatures,
        })
    }

    /// The note text, ending in a newline.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The signature lines, in order.
    pub fn signatures(&self) -> &[SignatureLine] {
        &self.signatures
    }

    /// Verifies the signatures against the trusted keys (see the module
    /// guarantees).
    pub fn verify(&self, trusted: &[VerifierKey]) -> Result<VerifiedNote, NoteError> {
        let mut verified_by = Vec::new();
        for sig in &self.signatures {
            let Some(key) = trusted
                .iter()
                .find(|k| k.name == sig.name && k.id == sig.id)
            else {
                continue;
            };
            let ok = <[u8; 64]>::try_from(sig.signature.as_slice())
                .map(|b| Signature::from_bytes(&b))
                .is_ok_and(|s| key.key.verify_strict(self.text.as_bytes(), &s).is_ok());
            if !ok {
                return Err(NoteError::BadSignature {
                    name: sig.name.clone(),
                    id: sig.id,
                });
            }
            if !verified_by.contains(&sig.name) {
                verified_by.push(sig.name.clone());
            }
        }
        if verified_by.is_empty() {
            let names = |it: &mut dyn Iterator<Item = String>| it.collect::<Vec<_>>().join(", ");
            return Err(NoteError::NoTrustedSignature {
                expected: names(&mut trusted.iter().map(|k| format!("{}+{:08x}", k.name, k.id))),
                found: names(
                    &mut self
                        .signatures
                        .iter()
                        .map(|s| format!("{}+{:08x}", s.name, s.id)),
                ),
            });
        }
        Ok(VerifiedNote {
            text: self.text.clone(),
            verified_by,
        })
    }
}

fn parse_signature_line(line: &str) -> Result<SignatureLine, &'static str> {
    let rest = line
        .strip_prefix(SIG_PREFIX)
        .ok_or("it does not start with an em dash and a space")?;
    let (name, b64) = rest
        .rsplit_once(' ')
        .ok_or("no space between key name and signature")?;
    if !valid_key_name(name) {
        return Err("the key name is empty or has a space or a plus");
    }
    let raw = STANDARD
        .decode(b64)
        .map_err(|_| "the signature is not canonical base64")?;
    if raw.len() < 5 {
        return Err("the signature is shorter than a key id and one byte");
    }
    Ok(SignatureLine {
        name: name.to_owned(),
        id: u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]),
        signature: raw[4..].to_vec(),
    })
}

/// Parses and verifies a note in one step.
pub fn open(bytes: &[u8], trusted: &[VerifierKey]) -> Result<VerifiedNote, NoteError> {
    Note::parse(bytes)?.verify(trusted)
}

/// Signs `text` (non-empty, ending in a newline, no control character but
/// newline) with each signer, returning the whole note.
pub fn sign(text: &str, signers: &[&SignerKey]) -> Result<String, NoteError> {
    if text.is_empty() || !text.ends_with('\n') || text.bytes().any(|b| b < 0x20 && b != b'\n') {
        return Err(NoteError::BadText);
    }
    let mut out = String::with_capacity(text.len() + 1 + 120 * signers.len());
    out.push_str(text);
    out.push('\n');
    for s in signers {
        out.push_str(&s.signature_line(text));
        out.push('\n');
    }
    Ok(out)
}
