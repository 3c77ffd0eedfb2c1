-- Lifetimes, exact delegation partitions, chain depth, unguessable ids and
-- per-currency daily reservations.
--
-- Guarantees held by the database itself (each named guard has a test in
-- gate/tests/db_guards.rs that violates it directly with SQL):
--   * ck_delegation_depth: a chain has at most 8 hops (a hop's depth is its
--     parent's plus one, set by delegation_attenuates, never by the writer);
--   * ck_delegation_claim: claim_paise is what a hop holds of its parent's
--     allocation: its whole budget while it is live; once revoked, only what
--     its branch has still spent or reserved (revocation returns the rest);
--   * delegation_partition_exact: at commit, every hop's allocated_paise is
--     exactly the sum of its children's claims, so a revocation can neither
--     lose nor invent budget;
--   * ck_request_authorized_at: a request that was authorized records when,
--     which starts its 24-hour lifetime;
--   * daily reservations are kept per currency (pk_daily_spend), so a cap
--     never adds paise and cents together.
-- Request and approval ids are random (gen_random_uuid), so they cannot be
-- enumerated across tenants.

ALTER TABLE delegations
    ADD COLUMN depth smallint NOT NULL DEFAULT 1,
    ADD COLUMN claim_paise bigint;
UPDATE delegations SET claim_paise = budget_paise;
ALTER TABLE delegations
    ALTER COLUMN claim_paise SET NOT NULL,
    ADD CONSTRAINT ck_delegation_depth CHECK (depth BETWEEN 1 AND 8),
    ADD CONSTRAINT ck_delegation_claim CHECK (
        claim_paise >= 0 AND claim_paise <= budget_paise
        AND (revoked_at IS NOT NULL OR claim_paise = budget_paise));

CREATE OR REPLACE FUNCTION delegation_attenuates() RETURNS trigger
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

-- A hop's depth and its first claim are derived, never written by the
-- caller: depth is the parent's plus one, and a live hop claims its budget.
CREATE FUNCTION delegation_derived_columns() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.claim_paise := NEW.budget_paise;
    NEW.depth := COALESCE((SELECT p.depth + 1 FROM delegations p
                            WHERE p.tenant_id = NEW.tenant_id AND p.id = NEW.parent_id), 1);
    RETURN NEW;
END;
$$;

CREATE TRIGGER delegation_derived_columns
    BEFORE INSERT ON delegations
    FOR EACH ROW EXECUTE FUNCTION delegation_derived_columns();

CREATE OR REPLACE FUNCTION delegation_terms_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.tenant_id, NEW.id, NEW.grantee_id, NEW.budget_paise, NEW.created_at, NEW.depth)
           IS DISTINCT FROM (OLD.tenant_id, OLD.id, OLD.grantee_id, OLD.budget_paise, OLD.created_at, OLD.depth)
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

-- Checked at commit, once per changed hop: the hop's own allocation and its
-- parent's are exactly the sums of their children's claims.
CREATE FUNCTION delegation_partition_exact() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    hop text;
    allocated bigint;
    claimed bigint;
BEGIN
    FOREACH hop IN ARRAY ARRAY[NEW.id, NEW.parent_id] LOOP
        CONTINUE WHEN hop IS NULL;
        SELECT d.allocated_paise,
               COALESCE((SELECT sum(c.claim_paise) FROM delegations c
                          WHERE c.tenant_id = d.tenant_id AND c.parent_id = d.id), 0)
          INTO allocated, claimed
          FROM delegations d WHERE d.tenant_id = NEW.tenant_id AND d.id = hop;
        IF allocated IS DISTINCT FROM claimed THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_partition_exact',
                MESSAGE = format('delegation_partition_exact: delegation %s has %s allocated but its children claim %s',
                                 hop, allocated, claimed);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER delegation_partition_exact
    AFTER INSERT OR UPDATE ON delegations
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION delegation_partition_exact();

ALTER TABLE payment_requests
    ADD COLUMN authorized_at timestamptz,
    ADD CONSTRAINT ck_request_authorized_at CHECK (
        state NOT IN ('AUTHORIZED', 'CHECKOUT_ISSUED', 'PROVIDER_PENDING', 'CAPTURED')
        OR authorized_at IS NOT NULL),
    ALTER COLUMN id SET DEFAULT ('req_' || replace(gen_random_uuid()::text, '-', ''));
ALTER TABLE approvals
    ALTER COLUMN id SET DEFAULT ('apr_' || replace(gen_random_uuid()::text, '-', ''));
DROP SEQUENCE payment_request_ids;
DROP SEQUENCE approval_ids;

ALTER TABLE daily_spend
    ADD COLUMN currency char(3) NOT NULL DEFAULT 'INR',
    DROP CONSTRAINT pk_daily_spend,
    ADD CONSTRAINT pk_daily_spend PRIMARY KEY (tenant_id, day, currency),
    ADD CONSTRAINT ck_daily_spend_currency_uppercase CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE daily_spend ALTER COLUMN currency DROP DEFAULT;

-- A new tenant's empty ledger chain is created by the owner's function, so
-- the application role needs no INSERT on ledger_head (it may only move a
-- head it already has, under its lock).
ALTER FUNCTION ledger_head_for_new_tenant() SECURITY DEFINER SET search_path = pg_catalog, public;

-- The provider's payments are upserted (a capture after a failed attempt
-- updates the payment's status) and kept captures are settled by reconcile;
-- the API keys are revoked in place. The application role updates these
-- rows and nothing more (roles: UPDATE only where the gate's code issues it).
GRANT UPDATE ON provider_payments, kept_captures TO spendgate_app;

-- Money reaches a request's books as a recorded captured payment (a webhook
-- or reconcile), so that is what CAPTURED needs, even in replica mode.
CREATE OR REPLACE FUNCTION request_captured_by_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'CAPTURED'
       AND (TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM 'CAPTURED')
       AND NOT EXISTS (
           SELECT 1 FROM provider_payments p
            WHERE p.tenant_id = NEW.tenant_id AND p.request_id = NEW.id
              AND p.status = 'captured') THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_captured_by_event',
            MESSAGE = format('request_captured_by_event: request %s may become CAPTURED only once a '
                             'captured payment is recorded for it', NEW.id);
    END IF;
    RETURN NEW;
END;
$$;
