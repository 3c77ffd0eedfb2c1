-- Signed checkpoints of each tenant's log (gate::service::tlog).
--
-- A tenant's log is a view of its ledger: its entries, in seq order, are the
-- leaves of an RFC 6962 SHA-256 tree (leaf = the entry's stored text). A
-- checkpoint is a C2SP signed note (origin `spendgate/<tenant>`, size, root)
-- under the tenant's Ed25519 log key, which is derived from the gate's
-- `log_key` and never stored here. Each checkpoint signed is kept, so that a
-- later consistency proof knows the sizes a witness may hold. A checkpoint
-- is keyed by what it signs (tenant, size, root): Ed25519 signatures are
-- deterministic, so signing the same tree again gives the same note and
-- keeps nothing new; two roots of one size (a rewritten ledger) are two
-- rows. No sequence: nothing here is a counter shared across tenants.
--
-- Guarantees held by the database itself:
--   * ck_log_checkpoint_size: a size is never negative;
--   * fk_log_checkpoint_tenant: a checkpoint belongs to a tenant;
--   * the application role may only read and add rows (the default
--     privileges give it SELECT and INSERT), never change or remove one.
-- Nothing here can make a forged checkpoint verify: the signature needs the
-- log key, which only the gate holds.

CREATE TABLE log_checkpoints (
    tenant_id text NOT NULL,
    size bigint NOT NULL,
    root text NOT NULL,
    note text NOT NULL,
    signed_at timestamptz NOT NULL,
    CONSTRAINT pk_log_checkpoints PRIMARY KEY (tenant_id, size, root),
    CONSTRAINT fk_log_checkpoint_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_log_checkpoint_size CHECK (size >= 0)
);

CREATE INDEX ix_log_checkpoints_signed ON log_checkpoints (tenant_id, signed_at);
