//! Ready to spread by tenant (docs/distribution.md): read from the catalog of
//! a freshly migrated database, every tenant-owned table (one with a
//! `tenant_id` column) keeps its keys inside one tenant:
//! - its primary key, every unique constraint and every unique index include
//!   `tenant_id`;
//! - every foreign key carries `tenant_id`, and maps it onto the referenced
//!   table's `tenant_id` (or onto `tenants.id`), so a row and the row it
//!   points at always live in the same tenant, hence on the same shard;
//! - its `tenant_id` is NOT NULL;
//! - and the schema has no sequence (no global counter).
//!
//! Today's exceptions are listed in [`KNOWN`] with why each is global. The
//! test fails on any violation that is not listed, and on a listed one that
//! no longer exists (unless it is marked as in transition), so the list stays
//! the truth. A table without `tenant_id` must be listed in [`GLOBAL_TABLES`].
//!
//! Needs `DATABASE_URL` (run it under `harness db run`), like every database test.

use std::collections::BTreeSet;

use gate::db::{self, FreshDatabase};
use sqlx::PgPool;

/// A known exception: the constraint (or index, or column) and why it is global.
struct Known {
    name: &'static str,
    why: &'static str,
    /// Being changed on another branch: it may disappear without failing the test.
    in_transition: bool,
}

const KNOWN: &[Known] = &[
    Known {
        name: "uq_payment_request_id",
        why: "request ids are random and handed to callers without their tenant (an \
              approver's link, a checkout); the global unique makes an id name one \
              request everywhere. Sharded: (tenant_id, id) already is the key, and the \
              id's randomness keeps it unique without the global index.",
        in_transition: false,
    },
    Known {
        name: "uq_checkout_authority_id",
        why: "an authority id is a bearer capability keyed by the webhook secret, \
              looked up by id alone at pay time; global so that one id can never be \
              two authorities. Sharded: routed by (tenant_id, id) once pay carries the tenant.",
        in_transition: false,
    },
    Known {
        name: "uq_provider_order_id",
        why: "the provider names an order by its own id, without our tenant: a webhook \
              must find the order from the provider's id alone. Sharded: a small \
              reference (or lookup) table provider_order_id -> tenant_id routes the event.",
        in_transition: false,
    },
    Known {
        name: "uq_provider_event_id",
        why: "the provider's event ids are global and each must be processed once, \
              whatever tenant it turns out to concern. Sharded: after routing by the \
              order's tenant, (tenant_id, provider_event_id) suffices, since an event \
              id belongs to exactly one order.",
        in_transition: false,
    },
    Known {
        name: "uq_provider_payment_id",
        why: "the provider names a payment by its own id, without our tenant; a payment \
              is recorded once whoever reports it (webhook or reconcile). Sharded: routed \
              through the order's tenant like the order itself.",
        in_transition: false,
    },
    Known {
        name: "uq_kept_capture_event",
        why: "a capture kept for reconcile is keyed by the provider's event id, which \
              carries no tenant of ours. Sharded: routed by the receipt's authority.",
        in_transition: false,
    },
    Known {
        name: "pk_api_keys",
        why: "a bearer key names its row by the key id alone (the caller has no tenant \
              until the key is read); the key decides the tenant. Sharded: a small \
              reference table key id -> tenant_id routes the call.",
        in_transition: false,
    },
    Known {
        name: "uq_api_keys_sha256",
        why: "a key's digest is unique across every tenant so that one secret can never \
              authenticate two actors. Sharded: it lives with the key-id routing table.",
        in_transition: false,
    },
];

/// Tables without `tenant_id`, and what they would be when sharded.
const GLOBAL_TABLES: &[(&str, &str)] = &[
    (
        "tenants",
        "distributed by its own id (co-located with every tenant-owned table)",
    ),
    ("_sqlx_migrations", "the migrations' bookkeeping, not data"),
    (
        "row_tokens",
        "the row-security token digests, keyed by scope (a tenant's id, or '*' for \
         every tenant): a reference table copied to every node",
    ),
];

async fn fresh() -> Option<FreshDatabase> {
    db::fresh_test_database()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn texts(pool: &PgPool, sql: &str) -> Vec<String> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

const TENANT_OWNED: &str = "SELECT c.relname::text FROM pg_class c \
     JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') \
       AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid \
                   AND a.attname = 'tenant_id' AND NOT a.attisdropped) \
     ORDER BY 1";

/// Constraints of tenant-owned tables: name, kind, table, columns, referenced
/// table (foreign keys) and referenced columns, in key order.
const CONSTRAINTS: &str = "SELECT con.conname::text, con.contype::text, t.relname::text, \
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY u(k, i) \
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = u.k ORDER BY u.i), \
       CASE WHEN con.confrelid = 0 THEN NULL ELSE rt.relname::text END, \
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY u(k, i) \
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = u.k ORDER BY u.i) \
     FROM pg_constraint con \
     JOIN pg_class t ON t.oid = con.conrelid \
     JOIN pg_namespace n ON n.oid = t.relnamespace \
     LEFT JOIN pg_class rt ON rt.oid = con.confrelid \
     WHERE n.nspname = 'public' AND con.contype IN ('p', 'u', 'f') \
     ORDER BY 1";

/// Unique indexes that back no constraint (e.g. partial uniques).
const UNIQUE_INDEXES: &str = "SELECT ic.relname::text, t.relname::text, \
       ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY u(k, o) \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.k ORDER BY u.o) \
     FROM pg_index i \
     JOIN pg_class ic ON ic.oid = i.indexrelid \
     JOIN pg_class t ON t.oid = i.indrelid \
     JOIN pg_namespace n ON n.oid = t.relnamespace \
     WHERE n.nspname = 'public' AND i.indisunique \
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) \
     ORDER BY 1";

type ConstraintRow = (
    String,
    String,
    String,
    Vec<String>,
    Option<String>,
    Vec<String>,
);

/// Every place the schema is not yet keyed by tenant, each as `name: why`.
async fn violations(pool: &PgPool) -> (BTreeSet<String>, Vec<String>) {
    let owned: BTreeSet<String> = texts(pool, TENANT_OWNED).await.into_iter().collect();
    let mut found = BTreeSet::new();
    let mut explained = Vec::new();
    let mut flag = |name: String, why: String| {
        explained.push(format!("{name}: {why}"));
        found.insert(name);
    };

    let all_tables = texts(
        pool,
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1",
    )
    .await;
    for table in &all_tables {
        if !owned.contains(table) && !GLOBAL_TABLES.iter().any(|(t, _)| t == table) {
            flag(
                format!("table {table}"),
                "has no tenant_id and is not a declared global table".into(),
            );
        }
    }

    let constraints: Vec<ConstraintRow> = sqlx::query_as(CONSTRAINTS)
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("reading constraints: {e}"));
    for (name, kind, table, cols, ref_table, ref_cols) in constraints {
        if !owned.contains(&table) {
            continue;
        }
        let has_tenant = cols.iter().any(|c| c == "tenant_id");
        match kind.as_str() {
            "p" | "u" if !has_tenant => flag(
                name,
                format!("key ({}) of {table} lacks tenant_id", cols.join(", ")),
            ),
            "f" => {
                let at = cols.iter().position(|c| c == "tenant_id");
                let target = match ref_table.as_deref() {
                    Some("tenants") => "id",
                    _ => "tenant_id",
                };
                let same_tenant = at.is_some_and(|i| ref_cols.get(i).is_some_and(|c| c == target));
                if !same_tenant {
                    flag(
                        name,
                        format!(
                            "foreign key ({}) -> {}({}) does not map tenant_id onto {target}",
                            cols.join(", "),
                            ref_table.as_deref().unwrap_or("?"),
                            ref_cols.join(", ")
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    let indexes: Vec<(String, String, Vec<String>)> = sqlx::query_as(UNIQUE_INDEXES)
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("reading unique indexes: {e}"));
    for (name, table, cols) in indexes {
        if owned.contains(&table) && !cols.iter().any(|c| c == "tenant_id") {
            flag(
                name,
                format!(
                    "unique index ({}) of {table} lacks tenant_id",
                    cols.join(", ")
                ),
            );
        }
    }

    let nullable = texts(
        pool,
        "SELECT c.relname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND a.attname = 'tenant_id' \
           AND NOT a.attnotnull AND NOT a.attisdropped ORDER BY 1",
    )
    .await;
    for table in nullable {
        flag(
            format!("{table}.tenant_id"),
            "may be NULL: a row without a tenant has no shard".into(),
        );
    }

    let sequences = texts(
        pool,
        "SELECT sequencename::text FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1",
    )
    .await;
    for s in sequences {
        flag(
            format!("sequence {s}"),
            "a global counter: every shard would ask one node".into(),
        );
    }
    (found, explained)
}

#[tokio::test]
async fn every_tenant_owned_key_includes_tenant_id_or_is_a_known_exception() {
    let Some(db) = fresh().await else {
        return;
    };
    let (found, explained) = violations(db.pool()).await;
    let known: BTreeSet<String> = KNOWN.iter().map(|k| k.name.to_string()).collect();
    let new: Vec<&String> = explained
        .iter()
        .filter(|e| {
            let name = e.split(':').next().unwrap_or_default();
            !known.contains(name)
        })
        .collect();
    assert!(
        new.is_empty(),
        "keys that would cross shards when the schema is spread by tenant (add tenant_id, \
         or list it in KNOWN with why it is global):\n{}",
        new.iter()
            .map(|s| format!("  {s}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let stale: Vec<&str> = KNOWN
        .iter()
        .filter(|k| !k.in_transition && !found.contains(k.name))
        .map(|k| k.name)
        .collect();
    assert!(
        stale.is_empty(),
        "exceptions listed in KNOWN that the schema no longer has (remove them): {stale:?}"
    );
    for k in KNOWN {
        assert!(!k.why.trim().is_empty(), "{} has no reason", k.name);
    }
    db.drop().await.unwrap_or_else(|e| panic!("{e}"));
}

/// The check itself can fail: a global unique and a cross-tenant foreign key
/// added to a fresh database are both found, with their names.
#[tokio::test]
async fn a_new_global_unique_or_cross_tenant_foreign_key_is_found() {
    let Some(db) = fresh().await else {
        return;
    };
    sqlx::raw_sql(
        "ALTER TABLE merchants ADD CONSTRAINT uq_merchant_display_name UNIQUE (display_name);
         CREATE UNIQUE INDEX uq_agent_id_everywhere ON agents (id);
         ALTER TABLE catalog_items ADD COLUMN buyer text;
         ALTER TABLE catalog_items ADD CONSTRAINT uq_catalog_buyer UNIQUE (tenant_id, buyer);
         ALTER TABLE catalog_items ADD CONSTRAINT fk_catalog_any_tenant_merchant
             FOREIGN KEY (buyer, merchant_id) REFERENCES merchants (tenant_id, id);
         CREATE TABLE global_notes (id text PRIMARY KEY);
         CREATE SEQUENCE note_ids;",
    )
    .execute(db.owner_pool())
    .await
    .unwrap_or_else(|e| panic!("changing the schema: {e}"));
    let (found, _) = violations(db.pool()).await;
    for name in [
        "uq_merchant_display_name",
        "uq_agent_id_everywhere",
        "fk_catalog_any_tenant_merchant",
        "table global_notes",
        "sequence note_ids",
    ] {
        assert!(found.contains(name), "{name} not found in {found:?}");
    }
    assert!(
        !found.contains("uq_catalog_buyer"),
        "a unique that includes tenant_id is fine"
    );
    db.drop().await.unwrap_or_else(|e| panic!("{e}"));
}
