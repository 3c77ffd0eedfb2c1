//! The local fake Razorpay of the adapter's contract tests: the
//! `fake-razorpay` crate, in contract mode (see its docs).

pub use fake_razorpay::*;
