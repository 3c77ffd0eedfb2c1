-- Tenants apart inside the database: row-level security for the runtime
-- role, bound to a token the login cannot forge.
--
-- * A token per scope: a tenant's id, or '*' (every tenant, for the gate's
--   paths that must find a tenant first: a key by its digest, an event by
--   its order, reconcile, the audit). The gate derives each from its ledger
--   key (`gate::service::ledger::row_token`), which the database never
--   holds; `row_tokens` keeps only each token's SHA-256 and is the
--   onboarding role's: the runtime role can neither read nor write it
--   (SQLSTATE 42501). `spendgate tenant apply` (the gate's seed) writes a
--   tenant's digest and the '*' digest.
-- * `spendgate_tenant()` (SECURITY DEFINER, STABLE) is the scope whose
--   digest is the SHA-256 of the session's `spendgate.tenant_token`, or
--   NULL: a token set to a guess, to a tenant's id or to another tenant's
--   digest opens nothing.
-- * On every table holding tenant rows, the RESTRICTIVE policy
--   `tenant_rows` binds the runtime role to that scope, for reading,
--   locking and writing (an insert or update into another tenant is
--   refused naming the policy); the permissive `tenant_rows_roles` lets
--   the runtime and onboarding roles see what no restrictive policy
--   hides. The onboarding role is bound by none; the owner owns the tables
--   and is not forced.
-- * Whether the policies are enforced is deployment configuration
--   (`row_security` in spendgate.toml): `spendgate migrate` calls
--   `spendgate_row_security(on)`, which enables or disables row-level
--   security on exactly the tables that carry `tenant_rows`. This
--   migration leaves it disabled.

CREATE TABLE row_tokens (
    -- A tenant's id, or '*' for every tenant.
    scope        text NOT NULL,
    token_sha256 text NOT NULL,
    CONSTRAINT pk_row_tokens PRIMARY KEY (scope),
    CONSTRAINT ck_row_token_sha256_hex CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT uq_row_token_sha256 UNIQUE (token_sha256)
);

REVOKE ALL ON row_tokens FROM spendgate_app;
REVOKE ALL ON row_tokens FROM spendgate_onboard;
GRANT SELECT, INSERT, UPDATE ON row_tokens TO spendgate_onboard;

-- Every name in it is schema-qualified, so it needs no search_path of its
-- own (a SET clause would cost a configuration save and restore on each
-- call, once per statement and table).
CREATE FUNCTION spendgate_tenant() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT r.scope FROM public.row_tokens r
     WHERE r.token_sha256 OPERATOR(pg_catalog.=) pg_catalog.encode(pg_catalog.sha256(
               pg_catalog.convert_to(COALESCE(
                   pg_catalog.current_setting('spendgate.tenant_token', true), ''), 'UTF8')), 'hex')
$$;

DO $$
DECLARE
    t record;
    col text;
BEGIN
    FOR t IN
        SELECT c.relname AS name,
               CASE WHEN c.relname = 'tenants' THEN 'id' ELSE 'tenant_id' END AS col
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
           AND (c.relname = 'tenants' OR EXISTS (
                   SELECT 1 FROM pg_attribute a
                    WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped))
    LOOP
        col := t.col;
        EXECUTE format(
            'CREATE POLICY tenant_rows_roles ON %I AS PERMISSIVE FOR ALL '
            'TO spendgate_app, spendgate_onboard USING (true) WITH CHECK (true)', t.name);
        EXECUTE format(
            'CREATE POLICY tenant_rows ON %I AS RESTRICTIVE FOR ALL TO spendgate_app '
            'USING ((SELECT spendgate_tenant()) IN (%I, ''*'')) '
            'WITH CHECK ((SELECT spendgate_tenant()) IN (%I, ''*''))', t.name, col, col);
    END LOOP;
END;
$$;

-- Whether an actor id is one of another tenant's agents or people: the one
-- thing of another tenant a tenant-bound statement may learn (the gate
-- answers TENANT_MISMATCH, not ACTOR_UNKNOWN, for it). SECURITY DEFINER, so
-- it reads past `tenant_rows`; it returns nothing else.
CREATE FUNCTION actor_elsewhere(p_tenant text, p_id text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT EXISTS (SELECT 1 FROM public.agents a WHERE a.id = p_id AND a.tenant_id <> p_tenant)
        OR EXISTS (SELECT 1 FROM public.people h WHERE h.id = p_id AND h.tenant_id <> p_tenant)
$$;

CREATE OR REPLACE FUNCTION caller_lookup(p_tenant text, p_id text)
RETURNS TABLE (
    tenant_known boolean,
    is_agent boolean,
    may_approve boolean,
    is_operator boolean,
    elsewhere boolean
)
LANGUAGE sql
STABLE
AS $$
    SELECT EXISTS (SELECT 1 FROM tenants t WHERE t.id = p_tenant),
           EXISTS (SELECT 1 FROM agents a WHERE a.tenant_id = p_tenant AND a.id = p_id),
           (SELECT h.may_approve FROM people h WHERE h.tenant_id = p_tenant AND h.id = p_id),
           (SELECT h.is_operator FROM people h WHERE h.tenant_id = p_tenant AND h.id = p_id),
           actor_elsewhere(p_tenant, p_id)
$$;

-- The switch: row-level security on (true) or off (false) for every table
-- that carries `tenant_rows`. The owner's alone (it owns the tables).
CREATE FUNCTION spendgate_row_security(enforced boolean) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    n integer := 0;
BEGIN
    FOR t IN SELECT tablename FROM pg_policies
              WHERE schemaname = 'public' AND policyname = 'tenant_rows'
    LOOP
        IF enforced THEN
            EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t.tablename);
        ELSE
            EXECUTE format('ALTER TABLE public.%I DISABLE ROW LEVEL SECURITY', t.tablename);
        END IF;
        n := n + 1;
    END LOOP;
    RETURN n;
END;
$$;

REVOKE ALL ON FUNCTION spendgate_row_security(boolean) FROM PUBLIC;
