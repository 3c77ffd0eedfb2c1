-- Two roles: the migrations run as the owner (`spendgate_owner`, who owns
-- every table, trigger and function), and the gate connects as the
-- application role (`spendgate_app`), which owns nothing and holds only the
-- privileges the gate's code uses. Both roles are created outside the
-- migrations, at the cluster level (README, "Deploying"; `harness db up` and
-- `harness db run` create them on the throwaway cluster).
--
-- Guarantees (gate/tests/db_roles.rs checks each from the catalog and by
-- trying it as the application role):
--   * the application role owns nothing, so it cannot ALTER a table, drop a
--     constraint, disable or drop a trigger (every one of those needs
--     ownership), and it is no superuser, so it cannot set
--     session_replication_role;
--   * it may SELECT every table and INSERT into every table but
--     `ledger_head` (seeded here, only ever moved) and `_sqlx_migrations`
--     (nothing at all there); UPDATE only where the gate issues an UPDATE or
--     takes a row lock (`SELECT .. FOR UPDATE` needs UPDATE on a column);
--     DELETE, TRUNCATE, REFERENCES and TRIGGER nowhere. In particular the
--     ledger (`ledger_entries`) is SELECT and INSERT only;
--   * tables created by later migrations get SELECT and INSERT for the
--     application role by default (ALTER DEFAULT PRIVILEGES below) and
--     nothing more: an UPDATE grant is a line in that migration, and the
--     privilege manifest in gate/tests/db_roles.rs makes every new table a
--     conscious decision;
--   * request_captured_by_event: a request becomes CAPTURED only when a
--     verified capture event (`payment.captured`, outcome `applied`) is
--     recorded for it. It is a guard of its own, fires before
--     request_state_transition (triggers fire in name order), and is
--     ENABLE ALWAYS, so it fires even in a session whose
--     session_replication_role is `replica` (which skips ordinary triggers).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'spendgate_app') THEN
        RAISE EXCEPTION USING ERRCODE = 'undefined_object',
            MESSAGE = 'roles: the application role spendgate_app does not exist; create it (and '
                      'spendgate_owner) before migrating: see README, "Deploying"';
    END IF;
    IF current_user = 'spendgate_app' THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'roles: migrations run as the owner, never as the application role spendgate_app';
    END IF;
END;
$$;

-- Every table: read, and append. The exceptions follow.
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO spendgate_app;
-- Column defaults draw ids from sequences (nextval needs USAGE).
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO spendgate_app;
-- The migrations' own bookkeeping is none of the gate's business.
REVOKE ALL ON _sqlx_migrations FROM spendgate_app;

-- UPDATE where the gate's code updates (gate/src/service: admin.rs,
-- approve.rs, budget.rs, grants.rs, pay.rs, requests.rs, webhook.rs) or locks
-- the row (lock.rs, through rows.rs).
GRANT UPDATE ON catalog_items, delegations, payment_requests, daily_spend, approvals,
    checkout_authorities, provider_orders TO spendgate_app;
-- tenants rows are only locked, never changed: UPDATE of the key column alone
-- (a changed id is refused by every foreign key that points at it).
GRANT UPDATE (id) ON tenants TO spendgate_app;

-- The ledger head is seeded by its migration and only ever moved (and
-- locked). Written as a block so the grant follows the table if a later
-- version of the ledger migration replaces it; the manifest test names
-- whatever the head becomes.
DO $$
BEGIN
    IF to_regclass('public.ledger_head') IS NOT NULL THEN
        REVOKE INSERT ON ledger_head FROM spendgate_app;
        GRANT UPDATE ON ledger_head TO spendgate_app;
    END IF;
END;
$$;

-- Tables and sequences of later migrations (run by the same owner).
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT ON TABLES TO spendgate_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO spendgate_app;

CREATE FUNCTION request_captured_by_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'CAPTURED'
       AND (TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM 'CAPTURED')
       AND NOT EXISTS (
           SELECT 1 FROM provider_events e
            WHERE e.tenant_id = NEW.tenant_id AND e.request_id = NEW.id
              AND e.event = 'payment.captured' AND e.outcome = 'applied') THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_captured_by_event',
            MESSAGE = format('request_captured_by_event: request %s may become CAPTURED only once a '
                             'verified capture event is recorded for it', NEW.id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER request_captured_by_event
    BEFORE INSERT OR UPDATE ON payment_requests
    FOR EACH ROW EXECUTE FUNCTION request_captured_by_event();

ALTER TABLE payment_requests ENABLE ALWAYS TRIGGER request_captured_by_event;
