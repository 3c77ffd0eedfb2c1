-- A tenant's world digest is kept with the tenant, written by every change
-- of its policy or catalog, so that a proposal whose gate holds the current
-- world compares one stored value instead of reading and hashing the policy
-- and the whole catalog.
--
-- Guarantees (tested by the database tests of flow_world_cache and db_guards
-- named in mutations/registry.yaml):
--   * tenant_world(tenant) is the one definition of a tenant's world: its
--     latest policy version (number and text), its catalog rows as JSON in
--     sku order, and `digest`, the SHA-256 of them, the very formula
--     proposal_state used before (the gate's cached digests stay valid).
--   * tenants.world_digest is tenant_world's digest as of the last write of
--     the tenant's policy versions or catalog rows: the triggers below
--     rewrite it after every INSERT, UPDATE and DELETE of catalog_items
--     (for the old and the new row's tenant), every TRUNCATE of it (for
--     every tenant), and every INSERT into policy_versions (which is
--     append-only: policy_versions_append_only). Each write locks the tenant
--     row first (rank 1 of the lock order, FOR NO KEY UPDATE, which never blocks
--     the key-share locks of foreign-key checks, so no proposal waits on it)
--     and only then reads the world, in a statement of its own: its
--     snapshot is taken after every earlier writer of the tenant has
--     committed, so the digest the last writer leaves is that of the world
--     every committed write made. Without the lock, two concurrent writers
--     could each hash a snapshot without the other's change, and one that
--     changed nothing could leave the digest of the world before the other
--     (a stamp an old cache would match).
--   * The functions that write it run as the migrations' owner (SECURITY
--     DEFINER, search_path pinned); the application role has no UPDATE on
--     the column and may not call world_restamp (EXECUTE revoked from
--     PUBLIC), so only these triggers write it.
--   * proposal_state trusts the stamp only to say "unchanged": when the
--     gate's digest equals it, the decision's state is locked at once, as
--     when the gate's digest equalled the hash proposal_state computed. Any
--     other case reads the world in full, exactly as before: a stamp that is
--     NULL (a tenant with no write yet), or that differs for any reason,
--     costs a read, never a decision on an old world.
--   * Nothing else about proposal_state changes: its parameters, its
--     columns, its caller lookup, its locks (decision_state's).
--
-- Why: the read of the policy and the catalog, the JSON of the catalog and
-- the hash of both ran in every proposal although they rarely change:
-- tenant_world alone took 40 µs of the server per call. With this
-- migration, the tenant-per-client proposal at 8 clients took 715, 706 and
-- 744 µs of CPU where it took 789, 796 and 755 µs, and ran at 2,623, 2,654
-- and 2,522/s where it ran at 2,385, 2,362 and 2,494/s (three alternated
-- pairs of `harness perf --load-only`, 2026-12-05).

CREATE FUNCTION tenant_world(p_tenant text)
RETURNS TABLE (version integer, policy jsonb, catalog json, digest text)
LANGUAGE sql
STABLE
AS $$
    SELECT w.version, w.policy, w.catalog,
           encode(sha256(convert_to(concat_ws(E'\n', 'spendgate world v1', w.version::text,
                                              w.policy::text, w.catalog::text), 'UTF8')), 'hex')
      FROM (SELECT v.version, v.policy,
                   (SELECT COALESCE(json_agg(c ORDER BY c.sku), '[]')
                      FROM (SELECT sku, merchant_id, price_paise, currency, category,
                                   max_quantity, available, description
                              FROM catalog_items WHERE tenant_id = p_tenant) c) AS catalog
              FROM (SELECT 1) AS one
              LEFT JOIN LATERAL (
                   SELECT pv.version, pv.policy FROM policy_versions pv
                    WHERE pv.tenant_id = p_tenant
                    ORDER BY pv.version DESC LIMIT 1) v ON true) w
$$;

ALTER TABLE tenants ADD COLUMN world_digest text;

-- Rewrites the digest of each of `p_tenants` (NULL: every tenant), each
-- tenant row locked first, in id order.
CREATE FUNCTION world_restamp(p_tenants text[]) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
BEGIN
    /* lock order 1: the tenant row */
    PERFORM 1 FROM tenants t
      WHERE p_tenants IS NULL OR t.id = ANY (p_tenants)
      ORDER BY t.id
      FOR NO KEY UPDATE;
    UPDATE tenants t SET world_digest = (SELECT w.digest FROM tenant_world(t.id) w)
     WHERE p_tenants IS NULL OR t.id = ANY (p_tenants);
END;
$$;

CREATE FUNCTION world_stamp_follows() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM world_restamp(NULL);
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM world_restamp(ARRAY[NEW.tenant_id]);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM world_restamp(ARRAY[OLD.tenant_id]);
    ELSE
        PERFORM world_restamp(ARRAY[OLD.tenant_id, NEW.tenant_id]);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER world_stamp_follows_catalog
    AFTER INSERT OR UPDATE OR DELETE ON catalog_items
    FOR EACH ROW EXECUTE FUNCTION world_stamp_follows();

CREATE TRIGGER world_stamp_follows_catalog_truncate
    AFTER TRUNCATE ON catalog_items
    FOR EACH STATEMENT EXECUTE FUNCTION world_stamp_follows();

CREATE TRIGGER world_stamp_follows_policy
    AFTER INSERT ON policy_versions
    FOR EACH ROW EXECUTE FUNCTION world_stamp_follows();

SELECT world_restamp(NULL);

-- Only the trigger (as the owner) rewrites stamps: nobody else may lock
-- every tenant row through it.
REVOKE EXECUTE ON FUNCTION world_restamp(text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION proposal_state(
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
    SELECT c.tenant_known, c.is_agent, c.may_approve, c.is_operator, c.elsewhere,
           (SELECT t.world_digest FROM tenants t WHERE t.id = p_tenant)
      INTO tenant_known, is_agent, may_approve, is_operator, elsewhere, world
      FROM caller_lookup(p_tenant, p_agent) c;
    IF NOT (tenant_known AND is_agent) THEN
        world := NULL;
        RETURN NEXT;
        RETURN;
    END IF;

    -- The stored stamp equal to the gate's digest: the world is the one the
    -- gate holds. Otherwise it is read and hashed in full.
    IF NOT p_lock_anyway AND p_world IS DISTINCT FROM world THEN
        SELECT w.version, w.policy, w.catalog, w.digest
          INTO version, policy, catalog, world
          FROM tenant_world(p_tenant) w;
        IF p_world IS DISTINCT FROM world THEN
            RETURN NEXT;
            RETURN;
        END IF;
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
