-- A decision reads at most as many of the agent's recorded proposals as its
-- policy's limits, and an approval is found by its request through an index.
--
-- Guarantees (tested by service::decision_state's database tests, the
-- velocity and denial-rate scenarios of the corpus, and
-- races::sixty_four_proposals_never_pass_the_velocity_limit):
--   * decision_state takes two more parameters, the policy's limits
--     (velocity.max_proposals and denial_rate.max_denials), and returns the
--     newest p_proposals_max of the agent's proposals made after p_since,
--     and the newest p_denials_max of its refusals: never more. The engine
--     only asks whether a window holds its limit (gate/src/policy.rs,
--     evaluate: count >= max), and a window's proposals are the newest ones
--     after p_since (p_since is the start of the longer window), so the
--     newest `max` answer exactly as all of them did: the count comes back
--     as min(count, max), which reaches max exactly when the count does.
--     Ties and instants after now (a clock stepped back) change nothing:
--     the engine counts every instant after a window's start.
--   * decision_state's statements always run their generic plan
--     (plan_cache_mode = force_generic_plan, for this function only): each
--     is a lookup or a walk of an index by the tenant and the agent, the
--     plan Postgres picks for it with the parameters unknown (an index scan
--     backwards, stopping at the limit, for the two reads above). Left to
--     choose, Postgres planned the limited reads afresh on about one call in
--     six (a load run at one client: 951 plans in 5,327 calls, 21 µs each on
--     average), because a plan that knows the limit looks cheaper.
--   * Everything else is as it was: the lock order, one statement per read
--     after the locks, SECURITY INVOKER; proposal_state passes the two limits
--     on and is otherwise unchanged.
--   * approvals gains a plain index on (tenant_id, request_id).
--
-- Why: every proposal of a known agent is recorded, refused ones too, and
-- the next proposal read all of them in the window, under the tenant's day
-- lock. An agent that kept proposing past its limits (a loop, or a
-- compromised agent) made each of its tenant's decisions read every one of
-- its proposals in the window, and held the day lock, which every agent of
-- the tenant waits for, that much longer: with 11,112 refused proposals in
-- the window, one read took 4.0 ms of the server's time, and 0.12 ms with
-- the standard limits (20 and 5), measured side by side in one database.
-- The read is now bounded by the policy, not by the flood. approve's "was
-- this request ever approved" lookup had no index it could use
-- (uq_live_approval covers only approvals not voided), so it read every
-- approval of the tenant; so did the check of
-- fk_approval_request_same_tenant for every request row deleted.

DROP FUNCTION proposal_state(text, text, date, text, bigint, boolean, timestamptz, text, integer,
                             text, boolean);
DROP FUNCTION decision_state(text, text, date, text, bigint, boolean, timestamptz, text, integer);

CREATE FUNCTION decision_state(
    p_tenant text,
    p_agent text,
    p_day date,
    p_currency text,
    p_cap bigint,
    p_judge boolean,
    p_since timestamptz,
    p_proposals_max bigint,
    p_denials_max bigint,
    p_key text,
    p_max_depth integer
) RETURNS TABLE (
    reserved_paise bigint,
    first jsonb,
    chains jsonb,
    proposals timestamptz[],
    denials timestamptz[]
)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_leaves text[] := '{}';
BEGIN
    chains := '[]';
    /* lock order 4: the tenant's day of reservations */
    SELECT d.reserved_paise INTO reserved_paise FROM daily_spend d
     WHERE d.tenant_id = p_tenant AND d.day = p_day AND d.currency = p_currency
       FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO daily_spend (tenant_id, day, currency, reserved_paise, cap_paise)
        VALUES (p_tenant, p_day, p_currency, 0, p_cap)
        ON CONFLICT (tenant_id, day, currency) DO NOTHING;
        /* lock order 4: the tenant's day of reservations */
        SELECT d.reserved_paise INTO reserved_paise FROM daily_spend d
         WHERE d.tenant_id = p_tenant AND d.day = p_day AND d.currency = p_currency
           FOR UPDATE;
    END IF;

    IF p_key IS NOT NULL THEN
        SELECT jsonb_build_object('id', r.id, 'decision', r.decision, 'reason', r.reason,
                                  'body_sha256', r.body_sha256)
          INTO first
          FROM payment_requests r
         WHERE r.tenant_id = p_tenant AND r.agent_id = p_agent AND r.idempotency_key = p_key;
    END IF;

    IF p_judge THEN
        /* lock order 5: delegation hops */
        v_leaves := ARRAY(
            SELECT h.id FROM delegations h
             WHERE h.tenant_id = p_tenant AND h.grantee_id = p_agent
             ORDER BY h.depth DESC, h.id
               FOR UPDATE);
        WITH RECURSIVE up AS (
            SELECT d.id AS leaf_id, d.created_at AS leaf_created, d.*, 0 AS hops_up
              FROM delegations d
             WHERE d.tenant_id = p_tenant AND d.id = ANY (v_leaves)
            UNION ALL
            SELECT up.leaf_id, up.leaf_created, p.*, up.hops_up + 1
              FROM delegations p
              JOIN up ON p.tenant_id = up.tenant_id AND p.id = up.parent_id
             WHERE up.hops_up < p_max_depth)
        SELECT COALESCE(jsonb_agg(jsonb_build_object(
                   'leaf_id', up.leaf_id, 'id', up.id, 'parent_id', up.parent_id,
                   'grantee_id', up.grantee_id, 'budget_paise', up.budget_paise,
                   'allocated_paise', up.allocated_paise, 'spent_paise', up.spent_paise,
                   'skus', up.skus,
                   'expires_at_us', (extract(epoch FROM up.expires_at) * 1000000)::bigint,
                   'revoked_at_us', (extract(epoch FROM up.revoked_at) * 1000000)::bigint)
                 ORDER BY up.leaf_created, up.leaf_id, up.hops_up DESC), '[]')
          INTO chains
          FROM up;
    END IF;

    IF p_since IS NOT NULL THEN
        -- The newest p_proposals_max of the agent's proposals, and the newest
        -- p_denials_max of its refusals, made after p_since: each read walks
        -- ix_payment_requests_agent_time backwards and stops at its limit.
        SELECT ARRAY(SELECT r.created_at FROM payment_requests r
                      WHERE r.tenant_id = p_tenant AND r.agent_id = p_agent
                        AND r.created_at > p_since
                      ORDER BY r.created_at DESC
                      LIMIT p_proposals_max),
               ARRAY(SELECT r.created_at FROM payment_requests r
                      WHERE r.tenant_id = p_tenant AND r.agent_id = p_agent
                        AND r.created_at > p_since AND r.decision = 'deny'
                      ORDER BY r.created_at DESC
                      LIMIT p_denials_max)
          INTO proposals, denials;
    END IF;

    RETURN NEXT;
END
$$;

CREATE FUNCTION proposal_state(
    p_tenant text,
    p_agent text,
    p_day date,
    p_currency text,
    p_cap bigint,
    p_judge boolean,
    p_since timestamptz,
    p_proposals_max bigint,
    p_denials_max bigint,
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
                          p_proposals_max, p_denials_max, p_key, p_max_depth) s;
    locked := true;
    RETURN NEXT;
END
$$;

CREATE INDEX ix_approvals_request ON approvals (tenant_id, request_id);
