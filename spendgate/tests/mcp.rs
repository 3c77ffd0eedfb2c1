//! `spendgate mcp` driven over stdio by a real MCP client (rmcp's
//! child-process transport): an HTTP client of a real `spendgate serve` on a
//! loopback port, holding only SPENDGATE_URL and SPENDGATE_AGENT_KEY; and
//! every way it refuses to start (exit 2, saying why).

mod support;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use support::*;

/// `spendgate mcp` with only the agent's two variables (and the log level).
fn command(url: &str, key: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_spendgate"));
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
async fn refused(mut c: tokio::process::Command) -> (Option<i32>, String) {
    let out = c.output().await.unwrap();
    (out.status.code(), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_client_drives_spendgate_mcp_against_spendgate_serve() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, human) = onboard(&db, work.path());
    let served = Served::serve(&db, work.path());
    let url = served.url.clone();

    let mut child = command(&url, &agent);
    child.stdin(std::process::Stdio::piped());
    let client = ().serve(TokioChildProcess::new(child).unwrap()).await.unwrap();
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, wire::mcp::TOOLS);
    let args = json!({"sku": "SNACK-BOX", "quantity": 2, "purpose": "team snacks"});
    let result = client
        .call_tool(
            CallToolRequestParams::new("propose_purchase")
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let said = serde_json::to_string(&result.content).unwrap();
    assert!(said.contains("allow"), "{said}");
    client.cancel().await.unwrap();
    let pool = gate::db::connect(&db.app).await.unwrap();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT agent_id, state FROM payment_requests WHERE tenant_id = 'acme'")
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    assert_eq!(
        rows,
        vec![("buyer-agent".to_owned(), "AUTHORIZED".to_owned())]
    );

    // An agent host holding the database's URL: refused before anything else.
    let mut with_db = command(&url, &agent);
    with_db.env("DATABASE_URL", "postgres://gate@127.0.0.1/spendgate");
    let (code, err) = refused(with_db).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("DATABASE_URL") && err.contains("must not hold"),
        "{err}"
    );

    // A human's key.
    let (code, err) = refused(command(&url, &human)).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("human") && !err.contains(&human), "{err}");

    // A revoked key, and one the service never issued.
    let revoked = ok(spendgate(&db, work.path()).args([
        "keys",
        "issue",
        "--tenant",
        "acme",
        "--actor",
        "buyer-agent",
    ]))
    .trim()
    .to_owned();
    ok(spendgate(&db, work.path())
        .args(["keys", "revoke"])
        .arg(&revoked));
    let unknown = format!("sgk_{}_{}", "f".repeat(16), "e".repeat(64));
    for bad in [&revoked, &unknown] {
        let (code, err) = refused(command(&url, bad)).await;
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("unknown or revoked") && !err.contains(bad.as_str()),
            "{err}"
        );
    }

    // Nothing listening at the URL, and no URL at all.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, err) = refused(command(&nowhere, &agent)).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("could not be reached"), "{err}");
    let mut no_url = command(&url, &agent);
    no_url.env_remove("SPENDGATE_URL");
    let (code, err) = refused(no_url).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("SPENDGATE_URL is not set"), "{err}");
    served.stop();
}
