-- Policy versions and delegation hops.
--
-- Guarantees held by the database itself (each named guard has a test in
-- gate/tests/db_guards.rs that violates it directly with SQL):
--   * a published policy version is never changed or removed
--     (policy_versions_append_only); versions count up from 1 per tenant;
--   * a delegation hop belongs to one tenant and points at its parent, its
--     grantee agent and (for a root) its human grantor through composite
--     (tenant_id, ...) foreign keys: no hop can reach into another tenant;
--   * ck_delegation_budget_partitioned: what a hop has allocated to children
--     plus what its own grantee has reserved never exceeds its budget;
--   * delegation_attenuates: writing a child hop, by ANY insert, takes the
--     child's budget from the parent's allocation in the same statement (so
--     the CHECK above refuses sibling oversubscription, even for concurrent
--     inserts), and refuses a child wider than its parent in budget, sku
--     scope or expiry, a child of a revoked parent, and a root hop whose
--     grantor is not a human who may approve;
--   * delegation_terms_immutable: a hop's terms (parent, grantor, grantee,
--     budget, skus, expiry) never change after it is written, and a
--     revocation is final.
-- Times are the gate's clock, written by the gate; nothing here reads now().

CREATE TABLE policy_versions (
    tenant_id text NOT NULL,
    version integer NOT NULL,
    policy jsonb NOT NULL,
    published_at timestamptz NOT NULL,
    CONSTRAINT pk_policy_versions PRIMARY KEY (tenant_id, version),
    CONSTRAINT fk_policy_versions_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_policy_version_positive CHECK (version > 0),
    CONSTRAINT ck_policy_is_object CHECK (jsonb_typeof(policy) = 'object')
);

CREATE FUNCTION policy_versions_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'integrity_constraint_violation',
        CONSTRAINT = 'policy_versions_append_only',
        MESSAGE = format('policy_versions_append_only: a published policy version is never changed (%s refused); publish a new version', TG_OP);
END;
$$;

CREATE TRIGGER policy_versions_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON policy_versions
    FOR EACH STATEMENT EXECUTE FUNCTION policy_versions_append_only();

CREATE TABLE delegations (
    tenant_id text NOT NULL,
    id text NOT NULL,
    -- The hop this one was carved from; NULL for a root granted by a human.
    parent_id text,
    -- The human who rooted the chain (root hops only).
    grantor_id text,
    -- The agent this hop authorizes.
    grantee_id text NOT NULL,
    budget_paise bigint NOT NULL,
    -- Taken by child hops when each was written (delegation_attenuates).
    allocated_paise bigint NOT NULL DEFAULT 0,
    -- Reserved by this hop's grantee for authorized requests.
    spent_paise bigint NOT NULL DEFAULT 0,
    -- NULL: every sku the policy allows.
    skus text[],
    expires_at timestamptz,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    revoked_by text,
    CONSTRAINT pk_delegations PRIMARY KEY (tenant_id, id),
    CONSTRAINT fk_delegation_parent_same_tenant FOREIGN KEY (tenant_id, parent_id)
        REFERENCES delegations (tenant_id, id),
    CONSTRAINT fk_delegation_grantor_same_tenant FOREIGN KEY (tenant_id, grantor_id)
        REFERENCES people (tenant_id, id),
    CONSTRAINT fk_delegation_grantee_same_tenant FOREIGN KEY (tenant_id, grantee_id)
        REFERENCES agents (tenant_id, id),
    CONSTRAINT fk_delegation_revoker_same_tenant FOREIGN KEY (tenant_id, revoked_by)
        REFERENCES people (tenant_id, id),
    CONSTRAINT ck_delegation_id_not_blank CHECK (btrim(id) <> ''),
    CONSTRAINT ck_delegation_one_grantor CHECK ((parent_id IS NULL) <> (grantor_id IS NULL)),
    CONSTRAINT ck_delegation_budget_positive CHECK (budget_paise > 0),
    CONSTRAINT ck_delegation_amounts_not_negative CHECK (allocated_paise >= 0 AND spent_paise >= 0),
    CONSTRAINT ck_delegation_budget_partitioned CHECK (allocated_paise + spent_paise <= budget_paise),
    CONSTRAINT ck_delegation_revocation_complete CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

CREATE INDEX ix_delegations_parent ON delegations (tenant_id, parent_id);
CREATE INDEX ix_delegations_grantee ON delegations (tenant_id, grantee_id);

CREATE FUNCTION delegation_attenuates() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    parent delegations%ROWTYPE;
    taken integer;
BEGIN
    IF NEW.allocated_paise <> 0 OR NEW.spent_paise <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_attenuates',
            MESSAGE = format('delegation_attenuates: delegation %s must start with nothing allocated or spent', NEW.id);
    END IF;
    IF NEW.parent_id IS NULL THEN
        IF NOT EXISTS (SELECT 1 FROM people
                       WHERE tenant_id = NEW.tenant_id AND id = NEW.grantor_id AND may_approve) THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_attenuates',
                MESSAGE = format('delegation_attenuates: root delegation %s: grantor %s is not a human of tenant %s who may approve',
                                 NEW.id, NEW.grantor_id, NEW.tenant_id);
        END IF;
        RETURN NEW;
    END IF;
    -- A hop's terms never change (delegation_terms_immutable), so reading them
    -- without a lock is safe; the allocation below is taken under the row lock
    -- the UPDATE itself takes.
    SELECT * INTO parent FROM delegations WHERE tenant_id = NEW.tenant_id AND id = NEW.parent_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'delegation_attenuates',
            MESSAGE = format('delegation_attenuates: parent %s of delegation %s is not a delegation of tenant %s',
                             NEW.parent_id, NEW.id, NEW.tenant_id);
    END IF;
    IF NEW.budget_paise > parent.budget_paise THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_attenuates',
            MESSAGE = format('delegation_attenuates: delegation %s widens its parent %s: budget %s > %s',
                             NEW.id, parent.id, NEW.budget_paise, parent.budget_paise);
    END IF;
    IF parent.skus IS NOT NULL AND (NEW.skus IS NULL OR NOT (NEW.skus <@ parent.skus)) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_attenuates',
            MESSAGE = format('delegation_attenuates: delegation %s widens its parent %s: sku scope', NEW.id, parent.id);
    END IF;
    IF parent.expires_at IS NOT NULL AND (NEW.expires_at IS NULL OR NEW.expires_at > parent.expires_at) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_attenuates',
            MESSAGE = format('delegation_attenuates: delegation %s widens its parent %s: expiry', NEW.id, parent.id);
    END IF;
    -- Take the allocation in this same statement. ck_delegation_budget_partitioned
    -- on the parent's row refuses oversubscription; a concurrent sibling waits
    -- for this row and is re-checked against the committed allocation.
    UPDATE delegations
       SET allocated_paise = allocated_paise + NEW.budget_paise
     WHERE tenant_id = NEW.tenant_id AND id = NEW.parent_id AND revoked_at IS NULL;
    GET DIAGNOSTICS taken = ROW_COUNT;
    IF taken <> 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_attenuates',
            MESSAGE = format('delegation_attenuates: parent %s of delegation %s is revoked', NEW.parent_id, NEW.id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER delegation_attenuates
    BEFORE INSERT ON delegations
    FOR EACH ROW EXECUTE FUNCTION delegation_attenuates();

CREATE FUNCTION delegation_terms_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.tenant_id, NEW.id, NEW.grantee_id, NEW.budget_paise, NEW.created_at)
           IS DISTINCT FROM (OLD.tenant_id, OLD.id, OLD.grantee_id, OLD.budget_paise, OLD.created_at)
       OR NEW.parent_id IS DISTINCT FROM OLD.parent_id
       OR NEW.grantor_id IS DISTINCT FROM OLD.grantor_id
       OR NEW.skus IS DISTINCT FROM OLD.skus
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_terms_immutable',
            MESSAGE = format('delegation_terms_immutable: the terms of delegation %s never change; revoke it and grant another', OLD.id);
    END IF;
    IF OLD.revoked_at IS NOT NULL
       AND (NEW.revoked_at IS DISTINCT FROM OLD.revoked_at OR NEW.revoked_by IS DISTINCT FROM OLD.revoked_by) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_terms_immutable',
            MESSAGE = format('delegation_terms_immutable: delegation %s is revoked, and a revocation is final', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER delegation_terms_immutable
    BEFORE UPDATE ON delegations
    FOR EACH ROW EXECUTE FUNCTION delegation_terms_immutable();
