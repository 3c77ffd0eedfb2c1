//! `harness mcp` driven over stdio by a real MCP client (rmcp's child-process
//! transport), against a fresh database on the `DATABASE_URL` server.

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

fn command(database: &str, key: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_harness"));
    c.args(["mcp", "--database", database])
        .env("SPENDGATE_AGENT_KEY", key)
        .env("SPENDGATE_WEBHOOK_SECRET", SECRET)
        .env("SPENDGATE_LOG", "error");
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_client_lists_and_calls_the_tools_of_harness_mcp() -> TestResult {
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
    let key = wire::keys::issue(db.pool(), "acme", "buyer-agent", gate.now())
        .await?
        .token;

    let client = ().serve(TokioChildProcess::new(command(db.name(), &key))?).await?;
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

    // A human's key does not start the tools.
    let human = wire::keys::issue(db.pool(), "acme", "finance-lead", gate.now())
        .await?
        .token;
    let out = command(db.name(), &human)
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("human") && !err.contains(&human), "{err}");
    db.drop().await?;
    Ok(())
}
