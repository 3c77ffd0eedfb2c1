//! `harness fake-razorpay --bind ADDR`: the fake Razorpay Orders API on its
//! own, for trying `spendgate serve` with `provider = "razorpay"` (or any
//! Razorpay client) without Razorpay.
//!
//! Guarantees: it binds a loopback address only (anything else is refused:
//! it is a test double, never a service), prints the base URL and the test
//! key pair it accepts on stdout, accepts what Razorpay documents (the
//! `fake-razorpay` crate's `Strictness::Documented`), and serves until
//! SIGTERM or Ctrl-C. It holds its orders in memory: a restart forgets them.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

/// `harness fake-razorpay`
#[derive(Debug, Args)]
pub struct FakeRazorpayArgs {
    /// The loopback address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:9797")]
    bind: SocketAddr,
}

pub fn run(args: FakeRazorpayArgs) -> Result<ExitCode> {
    if !args.bind.ip().is_loopback() {
        bail!(
            "--bind {} is not a loopback address: the fake Razorpay serves this machine only",
            args.bind
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .with_context(|| format!("binding {}", args.bind))?;
        let fake = fake_razorpay::serve(listener, fake_razorpay::Strictness::Documented)
            .context("serving the fake Razorpay")?;
        println!("razorpay_base_url = \"{}\"", fake.base_url);
        println!("razorpay_key_id = \"{}\"", fake_razorpay::KEY_ID);
        println!("razorpay_key_secret = \"{}\"", fake_razorpay::KEY_SECRET);
        eprintln!(
            "the fake Razorpay listens on {} (orders in memory; SIGTERM or Ctrl-C stops it)",
            fake.base_url
        );
        wire::shutdown_signal().await;
        Ok(ExitCode::SUCCESS)
    })
}
