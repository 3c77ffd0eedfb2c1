-- Payment requests, the tenant's daily reservations, and approvals.
--
-- Guarantees held by the database itself (each named guard has a test in
-- gate/tests/db_guards.rs that violates it directly with SQL):
--   * every request belongs to one tenant and reaches its agent, merchant,
--     delegation and policy version through composite (tenant_id, ...) keys;
--   * uq_request_idempotency: an idempotency key names one request per agent;
--   * request_state_transition: a request is created PROPOSED and moves only
--     along PROPOSED -> AUTHORIZED | PENDING_APPROVAL | DENIED;
--     PENDING_APPROVAL -> AUTHORIZED | DENIED | EXPIRED | CANCELLED;
--     AUTHORIZED -> CHECKOUT_ISSUED | EXPIRED | CANCELLED;
--     CHECKOUT_ISSUED -> PROVIDER_PENDING | EXPIRED | CANCELLED;
--     PROVIDER_PENDING -> CAPTURED | FAILED. DENIED, EXPIRED, CANCELLED,
--     CAPTURED and FAILED are final. CAPTURED needs a verified capture event
--     recorded for the request, so `UPDATE .. SET state = 'CAPTURED'` from
--     anywhere else fails;
--   * ck_request_reservation_matches_state: a request holds a reservation of
--     exactly its amount while AUTHORIZED, CHECKOUT_ISSUED, PROVIDER_PENDING
--     or CAPTURED and none in any other state, so the statement that denies,
--     expires, fails or cancels a request must release it in the same row;
--   * ck_daily_spend_within_cap: a tenant's reservations for one UTC day never
--     exceed the cap recorded with them (the gate reserves by a conditional
--     upsert in the same transaction as the request row);
--   * uq_live_approval: at most one live approval per request;
--     ck_approval_consumed_once: an approval is consumed at most once;
--     approval_by_permitted_human: only a human of the tenant who may
--     approve can hold an approval.

CREATE SEQUENCE payment_request_ids;

CREATE TABLE payment_requests (
    tenant_id text NOT NULL,
    id text NOT NULL DEFAULT ('req_' || lpad(nextval('payment_request_ids')::text, 6, '0')),
    agent_id text NOT NULL,
    idempotency_key text,
    -- SHA-256 of the raw body the agent sent (replays compare it byte for byte).
    body_sha256 text NOT NULL,
    -- What the agent asked for; NULL when the body did not parse.
    sku text,
    quantity integer,
    purpose text,
    -- What the server derived from its catalog; NULL when nothing was derived.
    merchant_id text,
    currency text,
    amount_paise bigint,
    purchase_digest text,
    -- The proposal's first decision: what an idempotent replay returns.
    decision text NOT NULL,
    reason text,
    state text NOT NULL,
    -- The reason for the latest refusal that moved the state, if any.
    state_reason text,
    policy_version integer,
    -- The leaf delegation the reservation was taken from.
    delegation_id text,
    reserved_day date,
    reserved_paise bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT pk_payment_requests PRIMARY KEY (tenant_id, id),
    CONSTRAINT uq_payment_request_id UNIQUE (id),
    -- Target of fk_authority_matches_request.
    CONSTRAINT uq_payment_request_purchase UNIQUE (tenant_id, id, merchant_id, amount_paise, currency, purchase_digest),
    CONSTRAINT fk_request_agent_same_tenant FOREIGN KEY (tenant_id, agent_id)
        REFERENCES agents (tenant_id, id),
    CONSTRAINT fk_request_merchant_same_tenant FOREIGN KEY (tenant_id, merchant_id)
        REFERENCES merchants (tenant_id, id),
    CONSTRAINT fk_request_delegation_same_tenant FOREIGN KEY (tenant_id, delegation_id)
        REFERENCES delegations (tenant_id, id),
    CONSTRAINT fk_request_policy_same_tenant FOREIGN KEY (tenant_id, policy_version)
        REFERENCES policy_versions (tenant_id, version),
    CONSTRAINT uq_request_idempotency UNIQUE (tenant_id, agent_id, idempotency_key),
    CONSTRAINT ck_request_decision_known CHECK (decision IN ('allow', 'step_up', 'deny')),
    CONSTRAINT ck_request_state_known CHECK (state IN ('PROPOSED', 'PENDING_APPROVAL', 'AUTHORIZED',
        'CHECKOUT_ISSUED', 'PROVIDER_PENDING', 'CAPTURED', 'FAILED', 'DENIED', 'EXPIRED', 'CANCELLED')),
    CONSTRAINT ck_request_body_digest_hex CHECK (body_sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_request_purchase_digest_hex CHECK (purchase_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_request_amount_positive CHECK (amount_paise > 0),
    CONSTRAINT ck_request_quantity_positive CHECK (quantity > 0),
    -- A request that is going anywhere has a derived purchase under a policy version.
    CONSTRAINT ck_request_live_has_purchase CHECK (
        state IN ('PROPOSED', 'DENIED')
        OR (merchant_id IS NOT NULL AND currency IS NOT NULL AND amount_paise IS NOT NULL
            AND purchase_digest IS NOT NULL AND policy_version IS NOT NULL)),
    CONSTRAINT ck_request_reservation_matches_state CHECK (
        CASE WHEN state IN ('AUTHORIZED', 'CHECKOUT_ISSUED', 'PROVIDER_PENDING', 'CAPTURED')
             THEN reserved_paise = amount_paise AND reserved_day IS NOT NULL AND delegation_id IS NOT NULL
             ELSE reserved_paise = 0
        END)
);

CREATE INDEX ix_payment_requests_agent_time ON payment_requests (tenant_id, agent_id, created_at);

CREATE FUNCTION request_state_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state IS DISTINCT FROM 'PROPOSED' THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
                MESSAGE = format('request_state_transition: a request is created PROPOSED, not %s', NEW.state);
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state IS NOT DISTINCT FROM OLD.state THEN
        RETURN NEW;
    END IF;
    IF (OLD.state, NEW.state) NOT IN (
        ('PROPOSED', 'AUTHORIZED'), ('PROPOSED', 'PENDING_APPROVAL'), ('PROPOSED', 'DENIED'),
        ('PENDING_APPROVAL', 'AUTHORIZED'), ('PENDING_APPROVAL', 'DENIED'),
        ('PENDING_APPROVAL', 'EXPIRED'), ('PENDING_APPROVAL', 'CANCELLED'),
        ('AUTHORIZED', 'CHECKOUT_ISSUED'), ('AUTHORIZED', 'EXPIRED'), ('AUTHORIZED', 'CANCELLED'),
        ('CHECKOUT_ISSUED', 'PROVIDER_PENDING'), ('CHECKOUT_ISSUED', 'EXPIRED'),
        ('CHECKOUT_ISSUED', 'CANCELLED'),
        ('PROVIDER_PENDING', 'CAPTURED'), ('PROVIDER_PENDING', 'FAILED')) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
            MESSAGE = format('request_state_transition: request %s may not move from %s to %s',
                             OLD.id, OLD.state, NEW.state);
    END IF;
    IF NEW.state = 'CAPTURED' AND NOT EXISTS (
        SELECT 1 FROM provider_events e
         WHERE e.tenant_id = NEW.tenant_id AND e.request_id = NEW.id
           AND e.event = 'payment.captured' AND e.outcome = 'applied') THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
            MESSAGE = format('request_state_transition: request %s may become CAPTURED only by a verified capture event', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER request_state_transition
    BEFORE INSERT OR UPDATE ON payment_requests
    FOR EACH ROW EXECUTE FUNCTION request_state_transition();

CREATE TABLE daily_spend (
    tenant_id text NOT NULL,
    day date NOT NULL,
    reserved_paise bigint NOT NULL DEFAULT 0,
    -- The policy's daily cap when the latest reservation was taken.
    cap_paise bigint NOT NULL,
    CONSTRAINT pk_daily_spend PRIMARY KEY (tenant_id, day),
    CONSTRAINT fk_daily_spend_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_daily_spend_not_negative CHECK (reserved_paise >= 0),
    CONSTRAINT ck_daily_spend_within_cap CHECK (reserved_paise <= cap_paise)
);

CREATE SEQUENCE approval_ids;

CREATE TABLE approvals (
    tenant_id text NOT NULL,
    id text NOT NULL DEFAULT ('apr_' || lpad(nextval('approval_ids')::text, 6, '0')),
    request_id text NOT NULL,
    approver_id text NOT NULL,
    approved_at timestamptz NOT NULL,
    -- 1 once the approval has been used to decide the request.
    consumptions smallint NOT NULL DEFAULT 0,
    consumed_at timestamptz,
    voided_at timestamptz,
    CONSTRAINT pk_approvals PRIMARY KEY (tenant_id, id),
    CONSTRAINT fk_approval_request_same_tenant FOREIGN KEY (tenant_id, request_id)
        REFERENCES payment_requests (tenant_id, id),
    CONSTRAINT fk_approval_approver_same_tenant FOREIGN KEY (tenant_id, approver_id)
        REFERENCES people (tenant_id, id),
    CONSTRAINT ck_approval_consumed_once CHECK (
        consumptions IN (0, 1) AND (consumptions = 1) = (consumed_at IS NOT NULL))
);

CREATE UNIQUE INDEX uq_live_approval ON approvals (tenant_id, request_id) WHERE voided_at IS NULL;

CREATE FUNCTION approval_by_permitted_human() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM people
                   WHERE tenant_id = NEW.tenant_id AND id = NEW.approver_id AND may_approve) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'approval_by_permitted_human',
            MESSAGE = format('approval_by_permitted_human: %s is not a human of tenant %s who may approve',
                             NEW.approver_id, NEW.tenant_id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER approval_by_permitted_human
    BEFORE INSERT OR UPDATE OF approver_id, tenant_id ON approvals
    FOR EACH ROW EXECUTE FUNCTION approval_by_permitted_human();
