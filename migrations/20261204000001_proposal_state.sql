-- A proposal's first round trip: its caller, whether the gate's copy of the
-- tenant's policy and catalog is still the current one, and, when it is, the
-- decision's state locked and read by decision_state.
--
-- Guarantees (tested by service::world_cache's database tests, the proposal
-- races and every proposal of the suite):
--   * The caller is looked up exactly as the gate's identity lookup does
--     (gate/src/service/identity.rs, lookup_columns): the tenant exists, the
--     id is one of its agents or people, or exists only elsewhere. Nothing is
--     locked for a caller that is not an agent of the tenant.
--   * `world` is the SHA-256 of the tenant's latest policy version (its
--     number and its text) and of every one of its catalog rows (a digest
--     nobody can make two worlds share), read in a
--     statement of its own before any lock: the same reads, in the same
--     order, as the plain read a proposal made before this function.
--   * Only when p_world equals it (the gate decides with that very policy and
--     catalog), or p_lock_anyway is set (the gate has just read them in the
--     statement before, as a proposal always did), are the locks taken and
--     the state read: by decision_state itself, with its lock order and its
--     statement-per-read snapshots; the policy and the catalog are then not
--     sent. Otherwise nothing is locked, and the policy and the catalog come
--     back so the gate can decide on them and call again: a gate never takes
--     its terms (the day's currency and cap, the velocity window) from a
--     cached policy that is no longer the tenant's.
--   * It runs with its caller's privileges (SECURITY INVOKER).
--
-- Why: the plain read of the caller, the policy and the catalog was a round
-- trip of its own in every proposal, and the catalog was sent and parsed
-- each time although it rarely changes.

CREATE FUNCTION proposal_state(
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
    SELECT EXISTS (SELECT 1 FROM tenants t WHERE t.id = p_tenant),
           EXISTS (SELECT 1 FROM agents a WHERE a.tenant_id = p_tenant AND a.id = p_agent),
           (SELECT h.may_approve FROM people h WHERE h.tenant_id = p_tenant AND h.id = p_agent),
           (SELECT h.is_operator FROM people h WHERE h.tenant_id = p_tenant AND h.id = p_agent),
           (EXISTS (SELECT 1 FROM agents a WHERE a.id = p_agent AND a.tenant_id <> p_tenant)
            OR EXISTS (SELECT 1 FROM people h WHERE h.id = p_agent AND h.tenant_id <> p_tenant))
      INTO tenant_known, is_agent, may_approve, is_operator, elsewhere;
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
