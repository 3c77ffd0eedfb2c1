//! `harness mcp` driven over stdio by a real MCP client (rmcp's child-process
//! transport): an HTTP client of a real served gate on a loopback port,
//! holding only SPENDGATE_URL and SPENDGATE_AGENT_KEY; and every way it
//! refuses to start (exit 2, saying why).

use std::sync::Arc;

use gate::provider::InProcessProvider;
use gate::service::{Gate, SystemClock};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use scenarios::generate::standard_world;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const SECRET: &str = "whsec_mcp_cli_test_0123456789abcdef012345";

/// `harness mcp` with only the agent's two variables (and the log level).
fn command(url: &str, key: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_harness"));
    c.arg("mcp")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SPENDGATE_URL", url)
        .env("SPENDGATE_AGENT_KEY", key)
        .env("SPENDGATE_LOG", "error")
        .stdin(std::process::Stdio::null());
    c
}

/// Runs `c` to its end: its exit code and stderr.
async fn refused(mut c: tokio::process::Command) -> Result<(Option<i32>, String), std::io::Error> {
    let out = c.output().await?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_client_drives_harness_mcp_against_a_served_gate() -> TestResult {
    let Some(db) = gate::db::fresh_test_database().await? else {
        return Ok(());
    };
    let gate = Gate::new(
        db.pool().clone(),
        InProcessProvider::new(),
        SECRET,
        Arc::new(SystemClock),
    )?;
    gate.seed(&standard_world().seed()).await?;
    let gate = Arc::new(gate);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(wire::serve(
        listener,
        gate.clone(),
        wire::WireConfig::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let key = wire::keys::issue(db.pool(), "acme", "buyer-agent", gate.now())
        .await?
        .token;

    let mut child = command(&url, &key);
    child.stdin(std::process::Stdio::piped());
    let client = ().serve(TokioChildProcess::new(child)?).await?;
    let mut names: Vec<String> = client
        .list_all_tools()
        .await?
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, wire::mcp::TOOLS);
    let args = json!({"sku": "SNACK-BOX", "quantity": 2, "purpose": "team snacks"});
    let result = client
        .call_tool(
            CallToolRequestParams::new("propose_purchase")
                .with_arguments(args.as_object().cloned().ok_or("not an object")?),
        )
        .await?;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let text = serde_json::to_string(&result.content)?;
    assert!(text.contains("allow"), "{text}");
    client.cancel().await?;
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT agent_id, state FROM payment_requests WHERE tenant_id = 'acme'")
            .fetch_all(db.pool())
            .await?;
    assert_eq!(
        rows,
        vec![("buyer-agent".to_owned(), "AUTHORIZED".to_owned())]
    );

    // An agent host holding the database's URL: refused before anything else.
    let mut with_db = command(&url, &key);
    with_db.env("DATABASE_URL", "postgres://gate@127.0.0.1/spendgate");
    let (code, err) = refused(with_db).await?;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("DATABASE_URL") && err.contains("must not hold it"),
        "{err}"
    );

    // A human's key.
    let human = wire::keys::issue(db.pool(), "acme", "finance-lead", gate.now())
        .await?
        .token;
    let (code, err) = refused(command(&url, &human)).await?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("human") && !err.contains(&human), "{err}");

    // A revoked key, and one the service never issued.
    let revoked = wire::keys::issue(db.pool(), "acme", "buyer-agent", gate.now())
        .await?
        .token;
    assert!(wire::keys::revoke(db.pool(), &revoked, gate.now()).await?);
    let unknown = format!("sgk_{}_{}", "f".repeat(16), "e".repeat(64));
    for bad in [&revoked, &unknown] {
        let (code, err) = refused(command(&url, bad)).await?;
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("unknown or revoked") && !err.contains(bad.as_str()),
            "{err}"
        );
    }

    // Nothing listening at the URL, and no URL at all.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let nowhere = format!("http://{}", closed.local_addr()?);
    drop(closed);
    let (code, err) = refused(command(&nowhere, &key)).await?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("could not be reached"), "{err}");
    let mut no_url = command(&url, &key);
    no_url.env_remove("SPENDGATE_URL");
    let (code, err) = refused(no_url).await?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("SPENDGATE_URL is not set"), "{err}");

    let _ = stop.send(());
    server.await??;
    drop(gate);
    db.drop().await?;
    Ok(())
}
