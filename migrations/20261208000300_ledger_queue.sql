-- The ledger's queue: an operation queues its entries in its own
-- transaction, without touching its tenant's head; the sequencer
-- (`gate::service::ledger::integrate`) numbers, chains and writes them to
-- `ledger_entries` under the head's lock, and deletes them from the queue
-- in the same transaction.
--
-- * Each queued row carries a random id the gate made (`entry_id`, 32
--   lower-case hex) and the gate's row MAC over tenant, id, kind, instant,
--   subject and body, keyed from the ledger key: the sequencer integrates
--   no row whose MAC fails, so a database login cannot queue an entry that
--   gets chained in. The id goes with the entry into `ledger_entries`
--   (`uq_ledger_entry_id`): a copy of a queued or integrated row is never
--   integrated.
-- * `ledger_queue_integrated_only`: a queued row is never updated, and is
--   deleted only once its id is in its tenant's ledger (what integration
--   does); TRUNCATE is refused. The runtime role holds SELECT, INSERT and
--   DELETE on the queue, no UPDATE.
-- * `fk_ledger_queue_head`: an entry is queued only for a tenant whose
--   chain has a head.

ALTER TABLE ledger_entries ADD COLUMN entry_id text;
ALTER TABLE ledger_entries
    ADD CONSTRAINT uq_ledger_entry_id UNIQUE (tenant_id, entry_id);

CREATE TABLE ledger_queue (
    tenant_id text NOT NULL,
    entry_id  text NOT NULL,
    -- The order entries were queued in (the instant of the inserting
    -- statement, then the entry's place in its operation): the sequencer integrates a
    -- tenant's committed rows in this order, never as a watermark. No
    -- global sequence: tenants share no counter.
    queued_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    ord       integer NOT NULL,
    kind      text NOT NULL,
    at        timestamptz NOT NULL,
    -- The entry's subject (a JSON string) and body, as the JSON text the
    -- gate serialized (a subject may hold a NUL, which text cannot).
    subject   text NOT NULL,
    body      text NOT NULL,
    row_mac   text NOT NULL,
    CONSTRAINT pk_ledger_queue PRIMARY KEY (tenant_id, entry_id),
    CONSTRAINT fk_ledger_queue_head FOREIGN KEY (tenant_id) REFERENCES ledger_head (tenant_id),
    CONSTRAINT ck_ledger_queue_entry_id CHECK (entry_id ~ '^[0-9a-f]{32}$'),
    CONSTRAINT ck_ledger_queue_row_mac CHECK (row_mac ~ '^[0-9a-f]{64}$')
);

CREATE INDEX ix_ledger_queue_order ON ledger_queue (tenant_id, queued_at, ord);

REVOKE ALL ON ledger_queue FROM spendgate_app;
GRANT SELECT, INSERT, DELETE ON ledger_queue TO spendgate_app;

-- SECURITY DEFINER: the look-up of the integrated id reads past row
-- security (the owner's function; it returns nothing to the caller).
CREATE FUNCTION ledger_queue_integrated_only() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (
        SELECT 1 FROM public.ledger_entries e
         WHERE e.tenant_id = OLD.tenant_id AND e.entry_id = OLD.entry_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'integrity_constraint_violation',
        CONSTRAINT = 'ledger_queue_integrated_only',
        MESSAGE = format('ledger_queue_integrated_only: a queued ledger entry is only '
                         'ever deleted by its integration; %s refused', TG_OP);
END;
$$;

CREATE TRIGGER ledger_queue_integrated_only
    BEFORE UPDATE OR DELETE ON ledger_queue
    FOR EACH ROW EXECUTE FUNCTION ledger_queue_integrated_only();

CREATE TRIGGER ledger_queue_no_truncate
    BEFORE TRUNCATE ON ledger_queue
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_queue_integrated_only();

-- Row security, as every tenant table has it (`20261207000200_row_security.sql`).
CREATE POLICY tenant_rows_roles ON ledger_queue AS PERMISSIVE FOR ALL
    TO spendgate_app, spendgate_onboard USING (true) WITH CHECK (true);
CREATE POLICY tenant_rows ON ledger_queue AS RESTRICTIVE FOR ALL TO spendgate_app
    USING ((SELECT spendgate_tenant()) IN (tenant_id, '*'))
    WITH CHECK ((SELECT spendgate_tenant()) IN (tenant_id, '*'));
