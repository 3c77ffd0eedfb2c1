-- The ledger: every proposal, decision, approval, authority, order and
-- provider event, appended to its tenant's own hash chain.
--
-- Guarantees held by the database itself (tested in gate/tests/db_guards.rs):
--   * ledger_append_only: UPDATE, DELETE and TRUNCATE of ledger_entries are
--     refused (one statement-level BEFORE trigger covers all three, so even a
--     statement that touches no row is refused);
--   * one chain per tenant: entries are keyed (tenant_id, seq) and numbered
--     1, 2, 3, ... within their tenant (pk_ledger_entries); each records the
--     hash of the one before it. ledger_head holds one row per tenant (made
--     with the tenant by ledger_head_for_new_tenant) with the number and hash
--     of the tenant's latest entry; appending takes that row's lock, so a
--     chain never forks and tenants never queue on each other. There is no
--     global head and no global sequence.
--   * fk_ledger_entry_head: an entry belongs to a chain that has a head. The
--     entry references the head row, not the tenant row, so an append locks
--     nothing of the tenant's: an operation that holds the tenant row (a
--     policy publication) and one that holds the head can never wait on each
--     other through the ledger.
-- The hashes are computed and checked by the gate (gate::service::ledger):
-- hash = HMAC-SHA256(ledger key, prev_hash || entry), entry being the
-- canonical JSON stored verbatim in `entry`. The key is the gate's and is
-- never stored here, so even this database's owner cannot write an entry
-- that verifies. `verify` walks each chain and names its first break.

CREATE TABLE ledger_head (
    tenant_id text NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL,
    CONSTRAINT pk_ledger_head PRIMARY KEY (tenant_id),
    CONSTRAINT fk_ledger_head_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_ledger_head_seq CHECK (seq >= 0),
    CONSTRAINT ck_ledger_head_hash_hex CHECK (hash ~ '^[0-9a-f]{64}$')
);

CREATE TABLE ledger_entries (
    tenant_id text NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    at timestamptz NOT NULL,
    entry text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    CONSTRAINT pk_ledger_entries PRIMARY KEY (tenant_id, seq),
    CONSTRAINT fk_ledger_entry_head FOREIGN KEY (tenant_id) REFERENCES ledger_head (tenant_id),
    CONSTRAINT ck_ledger_seq_positive CHECK (seq > 0),
    CONSTRAINT ck_ledger_hashes_hex CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$')
);

-- Every tenant starts with an empty chain: a head at 0 and the genesis hash.
CREATE FUNCTION ledger_head_for_new_tenant() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_head (tenant_id, seq, hash) VALUES (NEW.id, 0, repeat('0', 64));
    RETURN NULL;
END;
$$;

CREATE TRIGGER ledger_head_for_new_tenant
    AFTER INSERT ON tenants
    FOR EACH ROW EXECUTE FUNCTION ledger_head_for_new_tenant();

INSERT INTO ledger_head (tenant_id, seq, hash)
    SELECT id, 0, repeat('0', 64) FROM tenants;

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
