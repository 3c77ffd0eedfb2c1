//! `scenarios/heldout.txt` is exactly the held-out rule applied to the
//! committed corpus.
//!
//! To regenerate after adding scenarios:
//! `SPENDGATE_WRITE_HELDOUT=1 cargo test -p scenarios --test heldout_file`.

use scenarios::{heldout, load_corpus, project_dir};

#[test]
fn committed_heldout_file_equals_the_rule() {
    let corpus = load_corpus(project_dir()).expect("the committed corpus loads");
    let expected = heldout::render(corpus.scenarios.iter().map(|s| s.id.as_str()));
    let path = project_dir().join("heldout.txt");
    if std::env::var_os("SPENDGATE_WRITE_HELDOUT").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let committed = std::fs::read_to_string(&path).expect("scenarios/heldout.txt exists");
    assert_eq!(
        committed, expected,
        "heldout.txt is stale; see this test's doc to regenerate"
    );
    let listed = heldout::parse(&committed);
    let share = listed.len() as f64 / corpus.scenarios.len() as f64;
    assert!(
        (0.2..0.4).contains(&share),
        "{} of {} held out",
        listed.len(),
        corpus.scenarios.len()
    );
}
