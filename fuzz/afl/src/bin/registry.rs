//! AFL++ harness for the `registry` fuzz target (see fuzz/src/lib.rs).
#![forbid(unsafe_code)]
fn main() {
    afl::fuzz!(|data: &[u8]| {
        fuzz::registry(data);
    });
}
