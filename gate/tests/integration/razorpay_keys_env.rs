//! `RazorpayKeys::from_env` and `RazorpayProvider::from_env` read
//! `RAZORPAY_KEY_ID` and `RAZORPAY_KEY_SECRET`: neither set (or set empty) is
//! no provider, both set is the provider, one alone is an error naming both.
//!
//! Each case runs in a child process of this test binary with exactly the
//! variables it names: changing a running test process's environment is
//! `unsafe` in Rust 2024, and the gate forbids unsafe code. The parent checks
//! the child ran its one test and passed.

use std::process::Command;

use gate::provider::{ENV_KEY_ID, ENV_KEY_SECRET, RazorpayKeys, RazorpayProvider};

/// Tells the child which outcome to expect; unset, the child does nothing.
const EXPECT: &str = "SPENDGATE_TEST_EXPECT_KEYS";
const CHILD: &str = "razorpay_keys_env::the_keys_this_process_was_started_with";

/// The child: run only by [`run_child`], in a process of its own.
#[test]
#[ignore = "run by razorpay_keys_env's other tests in a child process"]
fn the_keys_this_process_was_started_with() {
    let Ok(expect) = std::env::var(EXPECT) else {
        return;
    };
    let keys = RazorpayKeys::from_env();
    let provider = RazorpayProvider::from_env();
    match expect.as_str() {
        "none" => {
            assert!(matches!(keys, Ok(None)), "{keys:?}");
            assert!(matches!(provider, Ok(None)));
        }
        "some" => {
            assert!(matches!(keys, Ok(Some(_))), "{keys:?}");
            assert!(matches!(provider, Ok(Some(_))));
        }
        "error" => {
            let err = keys.expect_err("one key alone is an error").to_string();
            assert!(
                err.contains(ENV_KEY_ID) && err.contains(ENV_KEY_SECRET),
                "{err}"
            );
            assert!(provider.is_err());
        }
        other => panic!("{EXPECT}={other} is not an expectation"),
    }
}

/// Runs the child with `vars` as the only Razorpay variables set.
fn run_child(vars: &[(&str, &str)], expect: &str) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([CHILD, "--exact", "--ignored", "--test-threads", "1"])
        .env_remove(ENV_KEY_ID)
        .env_remove(ENV_KEY_SECRET)
        .env(EXPECT, expect);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("running the child test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "expecting {expect} with {vars:?}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn neither_key_set_is_no_provider() {
    run_child(&[], "none");
}

#[test]
fn keys_set_empty_count_as_unset() {
    run_child(&[(ENV_KEY_ID, ""), (ENV_KEY_SECRET, "")], "none");
}

#[test]
fn both_keys_set_make_the_provider() {
    run_child(
        &[(ENV_KEY_ID, "rzp_test_AbC123"), (ENV_KEY_SECRET, "s3cret")],
        "some",
    );
}

#[test]
fn one_key_alone_is_an_error_naming_both() {
    run_child(&[(ENV_KEY_ID, "rzp_test_AbC123")], "error");
    run_child(&[(ENV_KEY_SECRET, "s3cret")], "error");
    // A key set empty is unset: the other alone is still an error.
    run_child(
        &[(ENV_KEY_ID, "rzp_test_AbC123"), (ENV_KEY_SECRET, "")],
        "error",
    );
}
