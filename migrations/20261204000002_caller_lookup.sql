-- One caller lookup, written once: `caller_lookup(tenant, id)` says what the
-- database knows of one actor id relative to one tenant. The gate's identity
-- lookup (gate/src/service/identity.rs, `resolve`) selects from it, and so
-- does `proposal_state`, replaced here to call it instead of repeating its
-- five subqueries.
--
-- Guarantees:
--   * tenant_known: the tenant exists. is_agent: the id is one of its agents.
--     may_approve and is_operator: the id is one of its people (NULL when it
--     is not). elsewhere: the id is an agent or a person of another tenant.
--   * It reads and locks nothing else, and returns exactly one row.
--   * It is a plain SQL function (STABLE, SECURITY INVOKER), so Postgres can
--     inline it into the statement that calls it.
--   * proposal_state is otherwise unchanged: same parameters, same columns,
--     same answers (a test holds its lookup to `resolve`'s for 8 kinds of
--     caller).

CREATE FUNCTION caller_lookup(p_tenant text, p_id text)
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
           (EXISTS (SELECT 1 FROM agents a WHERE a.id = p_id AND a.tenant_id <> p_tenant)
            OR EXISTS (SELECT 1 FROM people h WHERE h.id = p_id AND h.tenant_id <> p_tenant))
$$;

CREATE OR REPLACE FUNCTION proposal_state(
    p_tenant text,
    p_agent text,
    p_day date,
    p_currency text,
    p_cap bigint,
    p_judge boolean,
    p_since timestamptz,
    p_key text,
    p_max_depth integer,
    p_world text,
    p_lock_anyway boolean
) RETURNS TABLE (
    tenant_known boolean,
    is_agent boolean,
    may_approve boolean,
    is_operator boolean,
    elsewhere boolean,
    world text,
    version integer,
    policy jsonb,
    catalog json,
    locked boolean,
    reserved_paise bigint,
    first jsonb,
    chains jsonb,
    proposals timestamptz[],
    denials timestamptz[]
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
BEGIN
    locked := false;
    SELECT c.tenant_known, c.is_agent, c.may_approve, c.is_operator, c.elsewhere
      INTO tenant_known, is_agent, may_approve, is_operator, elsewhere
      FROM caller_lookup(p_tenant, p_agent) c;
    IF NOT (tenant_known AND is_agent) THEN
        RETURN NEXT;
        RETURN;
    END IF;

    SELECT v.version, v.policy,
           (SELECT COALESCE(json_agg(c ORDER BY c.sku), '[]')
              FROM (SELECT sku, merchant_id, price_paise, currency, category, max_quantity,
                           available, description
                      FROM catalog_items WHERE tenant_id = p_tenant) c)
      INTO version, policy, catalog
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (
           SELECT pv.version, pv.policy FROM policy_versions pv WHERE pv.tenant_id = p_tenant
            ORDER BY pv.version DESC LIMIT 1) v ON true;
    world := encode(sha256(convert_to(concat_ws(E'\n', 'spendgate world v1', version::text,
                                                policy::text, catalog::text), 'UTF8')), 'hex');

    IF p_world IS DISTINCT FROM world AND NOT p_lock_anyway THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- The gate decides with the world it named (or has just read): what is
    -- current now is not sent again.
    version := NULL;
    policy := NULL;
    catalog := NULL;

    SELECT s.reserved_paise, s.first, s.chains, s.proposals, s.denials
      INTO reserved_paise, first, chains, proposals, denials
      FROM decision_state(p_tenant, p_agent, p_day, p_currency, p_cap, p_judge, p_since,
                          p_key, p_max_depth) s;
    locked := true;
    RETURN NEXT;
END
$$;
