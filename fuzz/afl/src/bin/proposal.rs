//! AFL++ harness for the `proposal` fuzz target (see fuzz/src/lib.rs).
#![forbid(unsafe_code)]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        fuzz::proposal(data);
    });
}
