-- The ledger: every proposal, decision, approval, authority, order and
-- provider event, appended and hash-chained.
--
-- Guarantees held by the database itself (tested in gate/tests/db_guards.rs):
--   * ledger_append_only: UPDATE, DELETE and TRUNCATE of ledger_entries are
--     refused (one statement-level BEFORE trigger covers all three, so even a
--     statement that touches no row is refused);
--   * entries are numbered 1, 2, 3, ... (pk_ledger_entries) and each records
--     the hash of the one before it; ledger_head holds the number and hash of
--     the latest entry, and appending takes its row lock, so appends are
--     serialized and the chain never forks.
-- The hashes are computed and checked by the gate (gate::service::ledger):
-- hash = SHA-256(prev_hash || entry), entry being the canonical JSON stored
-- verbatim in `entry`. `verify` walks the chain and names the first break.

CREATE TABLE ledger_entries (
    seq bigint NOT NULL,
    tenant_id text,
    kind text NOT NULL,
    at timestamptz NOT NULL,
    entry text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    CONSTRAINT pk_ledger_entries PRIMARY KEY (seq),
    CONSTRAINT fk_ledger_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_ledger_seq_positive CHECK (seq > 0),
    CONSTRAINT ck_ledger_hashes_hex CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$')
);

CREATE TABLE ledger_head (
    singleton boolean NOT NULL DEFAULT true,
    seq bigint NOT NULL,
    hash text NOT NULL,
    CONSTRAINT pk_ledger_head PRIMARY KEY (singleton),
    CONSTRAINT ck_ledger_head_singleton CHECK (singleton),
    CONSTRAINT ck_ledger_head_seq CHECK (seq >= 0),
    CONSTRAINT ck_ledger_head_hash_hex CHECK (hash ~ '^[0-9a-f]{64}$')
);

INSERT INTO ledger_head (singleton, seq, hash) VALUES (true, 0, repeat('0', 64));

CREATE FUNCTION ledger_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'integrity_constraint_violation',
        CONSTRAINT = 'ledger_append_only',
        MESSAGE = format('ledger_append_only: the ledger is append-only; %s refused', TG_OP);
END;
$$;

CREATE TRIGGER ledger_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON ledger_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
