//! AFL++ harness for the `webhook` fuzz target (see fuzz/src/lib.rs).
#![forbid(unsafe_code)]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        fuzz::webhook(data);
    });
}
