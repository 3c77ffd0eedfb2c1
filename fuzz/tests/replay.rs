//! Every committed seed and fixed finding, through the plain (uninstrumented)
//! fuzz targets: the bounded pass `make verify` runs.
//!
//! `fuzz/seeds/<target>/*` are the inputs AFL++ starts from;
//! `fuzz/findings/<target>/*` are inputs that once broke a target's property
//! and were fixed. Every one must now get a typed answer. A finding whose fix
//! is still pending lives in `fuzz/pending/<target>/` with its own ignored
//! test in `tests/findings.rs`; when it is fixed, move the file into
//! `findings/` and delete that test.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| p.file_name().and_then(|n| n.to_str()) != Some("README.md"))
        .collect();
    files.sort();
    files
}

/// Runs `target` over `files` in `dir`; returns each failure as text.
fn replay(target: &str, files: &[PathBuf], dir: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for file in files {
        let data = match std::fs::read(file) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{}: cannot read: {e}", file.display()));
                continue;
            }
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if target == "scenarios" {
                Some(fuzz::scenarios_in(dir, &data))
            } else {
                fuzz::run(target, &data)
            }
        }));
        match outcome {
            Ok(Some(_)) => {}
            Ok(None) => failures.push(format!("{}: no target `{target}`", file.display())),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: {message}", file.display()));
            }
        }
    }
    failures
}

fn replay_target(target: &str) {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let seeds = inputs("seeds", target);
    assert!(
        seeds.len() >= 10,
        "{target}: only {} seeds in fuzz/seeds/{target}",
        seeds.len()
    );
    let mut files = seeds;
    files.extend(inputs("findings", target));
    let failures = replay(target, &files, scratch.path());
    assert!(
        failures.is_empty(),
        "{target}: {} of {} inputs broke the property:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn every_proposal_seed_and_finding_gets_a_typed_answer() {
    replay_target("proposal");
}

#[test]
fn every_webhook_seed_and_finding_gets_a_typed_answer() {
    replay_target("webhook");
}

#[test]
fn every_scenario_seed_and_finding_gets_a_typed_answer() {
    replay_target("scenarios");
}

#[test]
fn every_registry_seed_and_finding_gets_a_typed_answer() {
    replay_target("registry");
}

#[test]
fn the_seed_folders_are_exactly_the_targets() {
    let mut found: Vec<String> = std::fs::read_dir(fuzz_dir().join("seeds"))
        .expect("fuzz/seeds")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    found.sort();
    let mut targets: Vec<String> = fuzz::TARGETS.iter().map(|t| t.to_string()).collect();
    targets.sort();
    assert_eq!(found, targets);
}

#[test]
fn the_targets_answer_as_the_gate_does_on_known_inputs() {
    // A target that answered "ok" to everything would pass every replay; pin
    // a few answers so it cannot.
    let good = br#"{"sku":"CLOUD-STARTER","quantity":2,"purpose":"team credits"}"#;
    assert_eq!(fuzz::proposal(good), "ok");
    assert_eq!(
        fuzz::proposal(br#"{"sku":"A","quantity":0,"purpose":"x"}"#),
        "QUANTITY_INVALID"
    );
    assert_eq!(fuzz::proposal(b"\xff"), "PROPOSAL_MALFORMED");

    let body = br#"{"id":"evt_1"}"#;
    let sig = gate::service::sign_webhook(fuzz::WEBHOOK_SECRET, body);
    let mut signed = format!("X-Razorpay-Signature: {sig}\r\n\r\n").into_bytes();
    signed.extend_from_slice(body);
    assert_eq!(fuzz::webhook(&signed), "signature-valid");
    let mut forged = format!("x-razorpay-signature: {}\n\n", "0".repeat(64)).into_bytes();
    forged.extend_from_slice(body);
    assert_eq!(fuzz::webhook(&forged), "signature-invalid");
    assert_eq!(fuzz::webhook(body), "no-signature");

    let scratch = tempfile::tempdir().expect("a temporary folder");
    assert_eq!(fuzz::scenarios_in(scratch.path(), b""), "ok 0");
    assert!(fuzz::scenarios_in(scratch.path(), b"- id: Not Kebab\n").starts_with("refused"));
    assert!(fuzz::scenarios_in(scratch.path(), b"{").starts_with("refused 1 (\"Syntax\")"));

    assert_eq!(fuzz::registry(b"version: 2\n"), "RegistryFormat");
    assert_eq!(fuzz::registry(b"version: 1\nguards: []\n"), "ok 0");
}

#[test]
fn the_project_registry_and_a_corpus_file_load_through_the_targets() {
    let root = fuzz_dir().join("..");
    let registry = std::fs::read(root.join("mutations/registry.yaml")).expect("registry");
    assert!(fuzz::registry(&registry).starts_with("ok "));
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let corpus = std::fs::read(root.join("scenarios/corpus/provider-events.yaml")).expect("corpus");
    let answer = fuzz::scenarios_in(scratch.path(), &corpus);
    assert!(answer.starts_with("ok "), "{answer}");
}

/// A small deterministic mutator (xorshift), so the bounded pass in
/// `make verify` explores past the seeds without an instrumented build. The
/// real exploration is AFL++'s (`make fuzz`); this only keeps the seeds'
/// neighbourhood checked on every run, the same inputs each time.
struct Mutator(u64);

const TOKENS: [&[u8]; 12] = [
    b"\\u0000",
    b"\\ud800",
    b"\x00",
    b"\xff",
    b"\xe2\x80\xa8",
    b"\xf3\xa0\x81\x81",
    b"1e400",
    b"18446744073709551616",
    b"\"",
    b"{",
    b"[",
    b"*a",
];

impl Mutator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn mutate(&mut self, seed: &[u8], other: &[u8]) -> Vec<u8> {
        let mut data = seed.to_vec();
        for _ in 0..=self.below(3) {
            let at = self.below(data.len() + 1);
            match self.below(5) {
                0 if at < data.len() => data[at] ^= 1 << self.below(8),
                1 => {
                    let token = TOKENS[self.below(TOKENS.len())];
                    data.splice(at..at, token.iter().copied());
                }
                2 => {
                    let end = (at + self.below(16)).min(data.len());
                    data.drain(at..end);
                }
                3 => {
                    let end = (at + self.below(64)).min(data.len());
                    let copy = data[at..end].to_vec();
                    data.splice(at..at, copy);
                }
                _ => {
                    let from = self.below(other.len() + 1);
                    data.truncate(at);
                    data.extend_from_slice(&other[from..]);
                }
            }
        }
        data
    }
}

fn mutation_pass(target: &str, count: usize) {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let seeds: Vec<Vec<u8>> = inputs("seeds", target)
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect();
    assert!(!seeds.is_empty(), "{target}: no seeds");
    let mut rng = Mutator(0x5eed_f022 ^ target.len() as u64);
    let mut failures = Vec::new();
    for _ in 0..count {
        let seed = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        let data = rng.mutate(seed, other);
        let file = scratch.path().join("mutant");
        std::fs::write(&file, &data).expect("write the mutant");
        let broke = replay(target, std::slice::from_ref(&file), scratch.path());
        if !broke.is_empty() {
            failures.push(format!(
                "{:?}: {}",
                String::from_utf8_lossy(&data),
                broke.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{target}: {} of {count} mutants broke the property (commit each as a finding):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
#[ignore = "the bounded mutation pass: make fuzz-replay runs it"]
fn a_bounded_mutation_pass_over_the_proposal_seeds() {
    mutation_pass("proposal", 3000);
}

#[test]
#[ignore = "the bounded mutation pass: make fuzz-replay runs it"]
fn a_bounded_mutation_pass_over_the_webhook_seeds() {
    mutation_pass("webhook", 3000);
}

#[test]
#[ignore = "the bounded mutation pass: make fuzz-replay runs it"]
fn a_bounded_mutation_pass_over_the_scenario_seeds() {
    mutation_pass("scenarios", 600);
}

#[test]
#[ignore = "the bounded mutation pass: make fuzz-replay runs it"]
fn a_bounded_mutation_pass_over_the_registry_seeds() {
    mutation_pass("registry", 2000);
}

#[test]
fn the_valid_seeds_are_accepted_so_fuzzing_starts_deep() {
    // A seed meant to be valid that the format has since outgrown would leave
    // AFL++ mutating refusals only: each must still get through.
    let read = |target: &str, name: &str| {
        std::fs::read(fuzz_dir().join("seeds").join(target).join(name)).expect("seed")
    };
    let scratch = tempfile::tempdir().expect("a temporary folder");
    assert_eq!(fuzz::proposal(&read("proposal", "valid")), "ok");
    assert_eq!(fuzz::proposal(&read("proposal", "valid-devanagari")), "ok");
    assert_eq!(
        fuzz::webhook(&read("webhook", "signed-capture")),
        "signature-valid"
    );
    for name in ["valid", "valid-attack-with-class", "valid-new-verbs"] {
        let answer = fuzz::scenarios_in(scratch.path(), &read("scenarios", name));
        assert_eq!(answer, "ok 1", "scenarios/{name}");
    }
    assert_eq!(fuzz::registry(&read("registry", "valid")), "ok 3");
}
