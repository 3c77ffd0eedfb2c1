-- Credentials for the HTTP service (`wire/`) and the approval notes agents leave.
--
-- Guarantees held by the database itself (each named guard has a test in
-- wire/tests/db_guards.rs that violates it directly with SQL):
--   * an API key belongs to exactly one actor of exactly one tenant: either
--     an agent or a human, reached through composite (tenant_id, ...) foreign
--     keys, so a key can never name an actor of another tenant
--     (fk_api_keys_agent_same_tenant, fk_api_keys_person_same_tenant,
--     ck_api_keys_one_actor);
--   * only a digest is stored: key_sha256 is 64 lowercase hex characters
--     (ck_api_keys_sha256_hex), never the key itself, and no two keys share
--     one (uq_api_keys_sha256); the public key id has a fixed shape
--     (ck_api_keys_id_shape);
--   * a revocation is final and a key's binding never changes
--     (api_keys_binding_immutable): tenant, actor, digest and creation time
--     are fixed once written, and revoked_at, once set, stays as it was;
--     ck_api_keys_revoked_after_created orders the two times;
--   * an approval note names a request of the same tenant
--     (fk_approval_notes_request_same_tenant) and only the agent that made it
--     may leave one (approval_notes_by_requester: the note's agent is the
--     request's, itself an agent of the tenant); there is at most one per
--     request (pk_approval_notes).
--
-- The key id is looked up before the tenant is known (the bearer token names
-- it), so pk_api_keys is the key id alone; the id is random, so it carries
-- no tenant and no count.

CREATE TABLE api_keys (
    id text NOT NULL,
    tenant_id text NOT NULL,
    agent_id text,
    person_id text,
    key_sha256 text NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    CONSTRAINT pk_api_keys PRIMARY KEY (id),
    CONSTRAINT fk_api_keys_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT fk_api_keys_agent_same_tenant FOREIGN KEY (tenant_id, agent_id)
        REFERENCES agents (tenant_id, id),
    CONSTRAINT fk_api_keys_person_same_tenant FOREIGN KEY (tenant_id, person_id)
        REFERENCES people (tenant_id, id),
    CONSTRAINT ck_api_keys_one_actor CHECK (num_nonnulls(agent_id, person_id) = 1),
    CONSTRAINT ck_api_keys_id_shape CHECK (id ~ '^[0-9a-f]{16}$'),
    CONSTRAINT ck_api_keys_sha256_hex CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT uq_api_keys_sha256 UNIQUE (key_sha256),
    CONSTRAINT ck_api_keys_revoked_after_created CHECK (revoked_at IS NULL OR revoked_at >= created_at)
);

-- Serves the foreign keys when an actor row changes, and `keys list`.
CREATE INDEX ix_api_keys_tenant_agent ON api_keys (tenant_id, agent_id);
CREATE INDEX ix_api_keys_tenant_person ON api_keys (tenant_id, person_id);

CREATE FUNCTION api_keys_binding_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
       OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
       OR NEW.person_id IS DISTINCT FROM OLD.person_id
       OR NEW.key_sha256 IS DISTINCT FROM OLD.key_sha256
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'api key %: its binding (tenant, actor, digest) never changes', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'api_keys_binding_immutable';
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        RAISE EXCEPTION 'api key %: a revocation is final', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'api_keys_binding_immutable';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER api_keys_binding_immutable
    BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_binding_immutable();

-- An agent's note that its PENDING_APPROVAL request is waiting for a human
-- (the MCP tool request_approval). It decides nothing: approval is `approve`.
CREATE TABLE approval_notes (
    tenant_id text NOT NULL,
    request_id text NOT NULL,
    agent_id text NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT pk_approval_notes PRIMARY KEY (tenant_id, request_id),
    CONSTRAINT fk_approval_notes_request_same_tenant FOREIGN KEY (tenant_id, request_id)
        REFERENCES payment_requests (tenant_id, id)
);

CREATE FUNCTION approval_notes_by_requester() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A missing request is fk_approval_notes_request_same_tenant's to refuse.
    IF EXISTS (SELECT 1 FROM payment_requests
                WHERE tenant_id = NEW.tenant_id AND id = NEW.request_id
                  AND agent_id IS DISTINCT FROM NEW.agent_id) THEN
        RAISE EXCEPTION 'approval note for %: only the requesting agent may leave one', NEW.request_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'approval_notes_by_requester';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER approval_notes_by_requester
    BEFORE INSERT OR UPDATE ON approval_notes
    FOR EACH ROW EXECUTE FUNCTION approval_notes_by_requester();

-- A key is revoked in place; the application role may set its revocation
-- and change nothing else about it (api_keys_binding_immutable).
GRANT UPDATE (revoked_at) ON api_keys TO spendgate_app;
