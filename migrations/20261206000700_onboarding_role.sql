-- Who onboards is not who runs.
--
-- A third role, `spendgate_onboard`, creates tenants and what they hold
-- (people, agents, merchants), issues API keys and grants root delegations:
-- `spendgate tenant apply` and `spendgate keys` connect as it. The gate's
-- runtime role (`spendgate_app`, the login `serve` holds) cannot:
--   * it has no INSERT on tenants, people, agents, merchants or api_keys
--     (SQLSTATE 42501), so it cannot create a tenant, and with it the
--     tenant's ledger head (ledger_head_for_new_tenant fires only for a new
--     tenant; the head itself was never insertable);
--   * delegation_root_by_onboarding refuses a root delegation (one without
--     a parent) inserted as the runtime role; hops below a root stay the
--     runtime's, bounded by their parent (delegation_attenuates).
-- The onboarding role holds every privilege the runtime role holds (it
-- runs the same operations: a tenant's seed writes its policy, catalog and
-- ledger entries) plus those INSERTs. Like the other two it is created at
-- the cluster level (README, "Deploying"; `harness db up`/`db run` create
-- it on the throwaway cluster).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'spendgate_onboard') THEN
        RAISE EXCEPTION USING ERRCODE = 'undefined_object',
            MESSAGE = 'roles: the onboarding role spendgate_onboard does not exist; create it '
                      '(LOGIN, no other attribute) before migrating: see README, "Deploying"';
    END IF;
END;
$$;

-- The runtime role's privileges, mirrored: tables, columns, sequences,
-- schemas and functions, as granted by the migrations before this one.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT table_schema, table_name, privilege_type
          FROM information_schema.role_table_grants
         WHERE grantee = 'spendgate_app'
    LOOP
        EXECUTE format('GRANT %s ON %I.%I TO spendgate_onboard',
                       r.privilege_type, r.table_schema, r.table_name);
    END LOOP;
    FOR r IN
        SELECT c.table_schema, c.table_name, c.column_name, c.privilege_type
          FROM information_schema.column_privileges c
         WHERE c.grantee = 'spendgate_app'
           AND NOT EXISTS (
               SELECT 1 FROM information_schema.role_table_grants t
                WHERE t.grantee = 'spendgate_app' AND t.table_schema = c.table_schema
                  AND t.table_name = c.table_name AND t.privilege_type = c.privilege_type)
    LOOP
        EXECUTE format('GRANT %s (%I) ON %I.%I TO spendgate_onboard',
                       r.privilege_type, r.column_name, r.table_schema, r.table_name);
    END LOOP;
    FOR r IN
        SELECT n.nspname, c.relname
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
           AND CASE WHEN c.relkind = 'S'
                    THEN has_sequence_privilege('spendgate_app', c.oid, 'USAGE')
                    ELSE false END
    LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE %I.%I TO spendgate_onboard', r.nspname, r.relname);
    END LOOP;
    FOR r IN
        SELECT n.nspname FROM pg_namespace n
         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'public')
           AND n.nspname NOT LIKE 'pg_%'
           AND has_schema_privilege('spendgate_app', n.oid, 'USAGE')
    LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO spendgate_onboard', r.nspname);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS fn
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'public' AND p.proacl IS NOT NULL
           AND has_function_privilege('spendgate_app', p.oid, 'EXECUTE')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO spendgate_onboard', r.fn);
    END LOOP;
END;
$$;

-- Tables of later migrations: read and append for both.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT ON TABLES TO spendgate_onboard;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO spendgate_onboard;

-- Onboarding is the onboarding role's alone.
REVOKE INSERT ON tenants, people, agents, merchants, api_keys FROM spendgate_app;
GRANT INSERT ON tenants, people, agents, merchants, api_keys TO spendgate_onboard;
-- `keys revoke` ends a key.
GRANT UPDATE (revoked_at) ON api_keys TO spendgate_onboard;

CREATE FUNCTION delegation_root_by_onboarding() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent_id IS NULL AND current_user = 'spendgate_app' THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            CONSTRAINT = 'delegation_root_by_onboarding',
            MESSAGE = format('delegation_root_by_onboarding: root delegation %s of tenant %s is '
                             'granted by the onboarding role, never by the gate''s runtime role',
                             NEW.id, NEW.tenant_id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER delegation_root_by_onboarding
    BEFORE INSERT ON delegations
    FOR EACH ROW EXECUTE FUNCTION delegation_root_by_onboarding();

ALTER TABLE delegations ENABLE ALWAYS TRIGGER delegation_root_by_onboarding;
