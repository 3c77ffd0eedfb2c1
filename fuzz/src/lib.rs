//! spendgate's fuzz targets, as plain functions of raw bytes.
//!
//! Guarantees: each target feeds its bytes to one of the gate's input
//! boundaries and checks the property that boundary promises: **every input
//! gets a typed answer**, never a panic. A target panics exactly when that
//! property (or an invariant of the answer, listed on each target) is broken,
//! so a panic here is a finding. The same functions run in three places:
//! - instrumented, under AFL++ (`fuzz/afl`, `make fuzz`);
//! - plain, in `tests/replay.rs`, over every committed seed and finding
//!   (`make verify`);
//! - nowhere else: a target never touches the network or a database, and
//!   writes only one temporary file of its own (the scenario loader reads a
//!   path, not bytes).
//!
//! Each target returns a short text naming the answer (`ok`, a reason code,
//! an error kind), for the replay's messages and for tests that pin one.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use gate_core::proposal::{MAX_BODY_BYTES, MAX_PURPOSE_CHARS, MAX_QUANTITY};
use gate_core::webhook_signature::sign_webhook;
use gate_core::webhook_signature::signature_is_valid;
use mutations::Error as MutationsError;
use mutations::registry::Registry;
use scenarios::{Corpus, LoadOptions};

/// The fuzz targets by name: the names of `fuzz/seeds/*`, `fuzz/findings/*`
/// and the AFL++ binaries.
pub const TARGETS: [&str; 4] = ["proposal", "webhook", "scenarios", "registry"];

/// Runs the target called `name` on `data`; `None` if there is no such target.
pub fn run(name: &str, data: &[u8]) -> Option<String> {
    match name {
        "proposal" => Some(proposal(data)),
        "webhook" => Some(webhook(data)),
        "scenarios" => Some(scenarios(data)),
        "registry" => Some(registry(data)),
        _ => None,
    }
}

/// Target 1: an agent's proposal body, `gate_core::parse_proposal`.
///
/// Checks: the answer is `Ok` or a `Reason`; an accepted proposal keeps the
/// boundary's promises (body within `MAX_BODY_BYTES`, quantity in
/// `1..=MAX_QUANTITY`, a purpose that is not blank, at most
/// `MAX_PURPOSE_CHARS` characters, and free of control characters and
/// bidirectional overrides); the same bytes read through `read_body` get the
/// same answer; and the answer does not change on a second call.
pub fn proposal(data: &[u8]) -> String {
    let answer = gate_core::parse_proposal(data);
    assert_eq!(
        answer,
        gate_core::parse_proposal(data),
        "parse is deterministic"
    );
    if let Ok(body) = gate_core::proposal::read_body(data) {
        assert_eq!(
            gate_core::parse_proposal(&body),
            answer,
            "read_body then parse_proposal answers as parse_proposal alone"
        );
    }
    match answer {
        Ok(p) => {
            assert!(data.len() <= MAX_BODY_BYTES, "accepted an oversized body");
            assert!(
                (1..=MAX_QUANTITY).contains(&u64::from(p.quantity)),
                "accepted quantity {}",
                p.quantity
            );
            assert!(!p.purpose.trim().is_empty(), "accepted a blank purpose");
            assert!(
                p.purpose.chars().count() <= MAX_PURPOSE_CHARS,
                "accepted an overlong purpose"
            );
            assert!(
                !p.purpose.chars().any(|c| c.is_control()
                    || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')),
                "accepted a purpose with a control or bidi-override character: {:?}",
                p.purpose
            );
            "ok".into()
        }
        Err(reason) => reason.code().into(),
    }
}

/// The webhook secret the webhook target signs with (32 bytes or more, as the
/// gate requires of a real one).
pub const WEBHOOK_SECRET: &[u8] = b"spendgate-fuzz-webhook-secret-0123456789";

/// The header that carries the provider's signature (Razorpay's name; header
/// names are matched without regard to case).
pub const SIGNATURE_HEADER: &str = "x-razorpay-signature";

/// A webhook delivery as the fuzz input encodes it: an HTTP-style header
/// block (`Name: value` lines), a blank line, then the raw body. Input with no
/// blank line is all headers and an empty body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery<'a> {
    pub headers: Vec<(&'a [u8], &'a [u8])>,
    pub body: &'a [u8],
}

impl<'a> Delivery<'a> {
    /// Splits fuzz bytes into headers and body.
    pub fn split(data: &'a [u8]) -> Delivery<'a> {
        let (head, body) = match find(data, b"\r\n\r\n") {
            Some(at) => (&data[..at], &data[at + 4..]),
            None => match find(data, b"\n\n") {
                Some(at) => (&data[..at], &data[at + 2..]),
                None => (data, &data[data.len()..]),
            },
        };
        let headers = head
            .split(|b| *b == b'\n')
            .filter_map(|line| {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let colon = line.iter().position(|b| *b == b':')?;
                let value = &line[colon + 1..];
                let value = value.strip_prefix(b" ").unwrap_or(value);
                Some((&line[..colon], value))
            })
            .collect();
        Delivery { headers, body }
    }

    /// The first header called `name` (any case), if its value is UTF-8, as
    /// an HTTP layer would hand it on (`HeaderValue::to_str` is stricter: it
    /// also refuses non-ASCII, which only narrows what reaches the gate).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Target 2: a webhook delivery, headers and raw body, through the gate's
/// signature check (`gate_core::webhook_signature::signature_is_valid`).
///
/// Checks: the check answers for any header value; it accepts a signature
/// only if it is the HMAC-SHA256 of exactly these bytes under the secret (any
/// hex case, surrounding whitespace ignored), so no input forges one; the
/// true signature is always accepted; and the true signature under another
/// key, or under the empty key, is refused.
///
/// The body parser (`parse_event`) is `pub(crate)` in the gate, so this
/// target cannot reach it without a database; see `fuzz/README.md`. When the
/// gate exposes it, the parse of a verified delivery belongs at the end of
/// this function, as one call.
pub fn webhook(data: &[u8]) -> String {
    let delivery = Delivery::split(data);
    let given = delivery.header(SIGNATURE_HEADER);
    let accepted = signature_is_valid(WEBHOOK_SECRET, delivery.body, given);
    let expected = sign_webhook(WEBHOOK_SECRET, delivery.body);
    if accepted {
        let given = given.unwrap_or_default().trim().to_ascii_lowercase();
        assert_eq!(
            given, expected,
            "a signature that is not the HMAC of these bytes was accepted"
        );
    }
    assert!(
        signature_is_valid(WEBHOOK_SECRET, delivery.body, Some(&expected)),
        "the true signature was refused"
    );
    assert!(
        signature_is_valid(
            WEBHOOK_SECRET,
            delivery.body,
            Some(&expected.to_ascii_uppercase())
        ),
        "the true signature in upper case was refused"
    );
    let other = sign_webhook(b"another-secret-of-at-least-32-bytes!", delivery.body);
    assert!(
        !signature_is_valid(WEBHOOK_SECRET, delivery.body, Some(&other)),
        "a signature under another key was accepted"
    );
    let empty = sign_webhook(b"", delivery.body);
    assert!(
        !signature_is_valid(WEBHOOK_SECRET, delivery.body, Some(&empty)),
        "a signature under the empty key was accepted"
    );
    match (given, accepted) {
        (None, _) => "no-signature".into(),
        (Some(_), true) => "signature-valid".into(),
        (Some(_), false) => "signature-invalid".into(),
    }
}

/// Where the scenario target writes its input: one file per process, in a
/// folder of its own under the system's temporary folder.
pub fn scenario_scratch() -> PathBuf {
    std::env::temp_dir().join("spendgate-fuzz-scenarios")
}

/// Target 3: a scenario corpus file, through `scenarios::Corpus::load_with`
/// (the loader reads paths, so the bytes go to a temporary file first, which
/// is removed afterwards).
pub fn scenarios(data: &[u8]) -> String {
    let dir = scenario_scratch();
    let made = std::fs::create_dir_all(&dir);
    assert!(made.is_ok(), "cannot make {}: {made:?}", dir.display());
    scenarios_in(&dir, data)
}

/// As [`scenarios`], writing the file into `dir`.
///
/// Checks: every refusal names a file, and that file is the input or one of
/// the project's own files (its taxonomy or a world); every refusal renders
/// as text; every loaded scenario has an origin in the input file; and every
/// loaded scenario written back with `Scenario::to_yaml` loads again as the
/// same scenario.
pub fn scenarios_in(dir: &Path, data: &[u8]) -> String {
    let file = dir.join(format!("input-{}.yaml", std::process::id()));
    let answer = load_scenarios(&file, data);
    let _ = std::fs::remove_file(&file);
    answer
}

fn load_scenarios(file: &Path, data: &[u8]) -> String {
    let written = std::fs::write(file, data);
    assert!(
        written.is_ok(),
        "cannot write {}: {written:?}",
        file.display()
    );
    let project = scenarios::project_dir();
    let options = LoadOptions {
        project_dir: project.clone(),
    };
    let corpus = Corpus::load_with(file, &options);
    for error in &corpus.errors {
        assert!(
            error.file == file || error.file.starts_with(&project),
            "a refusal names a file that is neither the input nor the project's: {error}"
        );
        assert!(
            !error.to_string().is_empty(),
            "a refusal renders as nothing"
        );
    }
    for scenario in &corpus.scenarios {
        let origin = corpus.origins.get(&scenario.id);
        assert!(
            origin.is_some_and(|o| o.file == file),
            "scenario `{}` loaded without an origin in the input",
            scenario.id
        );
    }
    for scenario in &corpus.scenarios {
        let text = scenario.to_yaml();
        let written = std::fs::write(file, &text);
        assert!(
            written.is_ok(),
            "cannot write {}: {written:?}",
            file.display()
        );
        let again = Corpus::load_with(file, &options);
        assert!(
            again.errors.is_empty(),
            "`{}` written back did not load: {}\n{text}",
            scenario.id,
            again.errors[0]
        );
        assert_eq!(
            again.scenarios.as_slice(),
            std::slice::from_ref(scenario),
            "`{}` written back loads as another scenario:\n{text}",
            scenario.id
        );
    }
    match corpus.errors.first() {
        None => format!("ok {}", corpus.scenarios.len()),
        Some(first) => format!("refused {} ({:?})", corpus.errors.len(), kind_name(first)),
    }
}

fn kind_name(error: &scenarios::LoadError) -> String {
    let debug = format!("{:?}", error.kind);
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The path the registry target names its input by.
pub const REGISTRY_PATH: &str = "fuzz/registry.yaml";

/// Target 4: mutation-registry text, through `Registry::parse`. Bytes that are
/// not UTF-8 are refused by `Registry::load`'s read before parsing, so the
/// target parses their lossy decoding instead (every input reaches the
/// parser).
///
/// Checks: the answer is a registry or a `RegistryFormat` error naming the
/// path given, or a `RegistryEntry` error naming an entry; a registry that
/// loaded has version 1 and distinct guard ids, each of which finds its guard.
pub fn registry(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let path = Path::new(REGISTRY_PATH);
    match Registry::parse(&text, path) {
        Ok(registry) => {
            assert_eq!(registry.version, 1, "loaded an unsupported version");
            let mut ids: Vec<&str> = registry.guards.iter().map(|g| g.id.as_str()).collect();
            ids.sort_unstable();
            let count = ids.len();
            ids.dedup();
            assert_eq!(ids.len(), count, "loaded a registry with a duplicate id");
            for guard in &registry.guards {
                assert!(
                    registry.guard(&guard.id).is_some(),
                    "guard `{}` not found",
                    guard.id
                );
            }
            format!("ok {}", registry.guards.len())
        }
        Err(MutationsError::RegistryFormat { path: named, .. }) => {
            assert_eq!(named, path, "a format error names another file");
            "RegistryFormat".into()
        }
        Err(MutationsError::RegistryEntry { .. }) => "RegistryEntry".into(),
        Err(other) => panic!("parsing registry text gave an unexpected kind of error: {other}"),
    }
}
