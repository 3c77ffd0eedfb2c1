-- The state a decision is made on, locked and read in one round trip.
--
-- Guarantees (tested by races::sixty_four_proposals_never_pass_the_velocity_limit,
-- the other proposal races, service::lock's tests of the order, and every
-- proposal and approval of the suite):
--   * decision_state takes its locks in the gate's one lock order
--     (gate/src/service/lock.rs, whose tests read this file): first the
--     tenant's day of reservations in the policy's currency (rank 4; the
--     row is opened first on the day's first decision), then, when asked to
--     judge, every delegation hop the agent holds (rank 5, deepest first).
--   * Every read comes after the locks, each in a statement of its own: under
--     READ COMMITTED each statement takes its snapshot when it starts, after
--     the locks were granted, so it sees everything the previous holder
--     committed (its proposal, its reservation). One SQL statement could not
--     do this: its snapshot is taken before its own lock wait.
--   * It reads, and decides nothing: the reservations of the day, the
--     request an idempotency key names, the chain above each of the agent's
--     hops (root first, oldest hop first) and the agent's recorded proposals
--     since an instant. The gate decides on them in Rust, in the same
--     transaction, and the locks are held until it commits.
--   * It runs with its caller's privileges (SECURITY INVOKER).
--   * A hop's instants come back as microseconds since 1970 (exact: extract
--     gives a numeric), never as text: JSON's timestamp text has five digits
--     after year 9999, which no RFC 3339 reader takes.
--
-- Why: a proposal was six round trips under the day lock, each a context
-- switch on both sides; this makes the locks and reads one.

CREATE FUNCTION decision_state(
    p_tenant text,
    p_agent text,
    p_day date,
    p_currency text,
    p_cap bigint,
    p_judge boolean,
    p_since timestamptz,
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
        SELECT array_agg(r.created_at), array_agg(r.created_at) FILTER (WHERE r.decision = 'deny')
          INTO proposals, denials
          FROM payment_requests r
         WHERE r.tenant_id = p_tenant AND r.agent_id = p_agent AND r.created_at > p_since;
    END IF;

    RETURN NEXT;
END
$$;
