//! AFL++ harness for the `scenarios` fuzz target (see fuzz/src/lib.rs).
#![forbid(unsafe_code)]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        fuzz::scenarios(data);
    });
}
