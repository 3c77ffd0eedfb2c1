-- Money that has moved: payments, NEEDS_REVIEW, event ids of any length, and
-- captures kept for reconcile.
--
-- Guarantees held by the database itself (each named guard has a test in
-- gate/tests/db_provider_guards.rs that violates it directly with SQL):
--   * provider_payments records each payment the provider reported once
--     (uq_provider_payment_id), and fk_provider_payment_matches_order: a
--     payment carries exactly the request, amount and currency of its order;
--     ck_provider_payment_status_known: 'captured' or 'failed';
--   * request_state_transition (replaced): as before, plus NEEDS_REVIEW, the
--     state of a request that money reached after it had left
--     PROVIDER_PENDING. A request becomes CAPTURED or NEEDS_REVIEW only when
--     a captured payment is recorded for it; NEEDS_REVIEW is final;
--   * ck_request_reservation_matches_state (replaced): a NEEDS_REVIEW request
--     holds at least its amount (every captured paisa of it is counted);
--   * ck_daily_spend_within_cap and ck_delegation_budget_partitioned
--     (replaced): the only spend allowed past a cap is money the provider
--     already captured (review_paise), counted so that nothing more is
--     reserved past the cap; daily_spend_review_in_step and
--     delegation_review_in_step: review_paise only grows, and only in step
--     with the spend it excuses, so no writer can raise it to make room;
--   * uq_provider_event_id (moved): an event id of any length is deduplicated
--     exactly by its SHA-256 (event_id_sha256, derived by the database from
--     the id's bytes); the id itself is kept as bytes, never as text;
--   * kept_captures: a signed capture for an order the gate had not recorded,
--     whose receipt names one of the tenant's authorities, is kept once per
--     event (uq_kept_capture_event) until reconcile settles it.

-- NEEDS_REVIEW ---------------------------------------------------------------

ALTER TABLE payment_requests DROP CONSTRAINT ck_request_state_known;
ALTER TABLE payment_requests ADD CONSTRAINT ck_request_state_known CHECK (state IN ('PROPOSED',
    'PENDING_APPROVAL', 'AUTHORIZED', 'CHECKOUT_ISSUED', 'PROVIDER_PENDING', 'CAPTURED', 'FAILED',
    'DENIED', 'EXPIRED', 'CANCELLED', 'NEEDS_REVIEW'));

ALTER TABLE payment_requests DROP CONSTRAINT ck_request_reservation_matches_state;
ALTER TABLE payment_requests ADD CONSTRAINT ck_request_reservation_matches_state CHECK (
    CASE WHEN state IN ('AUTHORIZED', 'CHECKOUT_ISSUED', 'PROVIDER_PENDING', 'CAPTURED')
         THEN reserved_paise = amount_paise AND reserved_day IS NOT NULL AND delegation_id IS NOT NULL
         WHEN state = 'NEEDS_REVIEW'
         THEN reserved_paise >= amount_paise AND reserved_day IS NOT NULL AND delegation_id IS NOT NULL
         ELSE reserved_paise = 0
    END);

ALTER TABLE daily_spend ADD COLUMN review_paise bigint NOT NULL DEFAULT 0;
ALTER TABLE daily_spend DROP CONSTRAINT ck_daily_spend_within_cap;
ALTER TABLE daily_spend ADD CONSTRAINT ck_daily_spend_within_cap
    CHECK (reserved_paise <= cap_paise + review_paise);

ALTER TABLE delegations ADD COLUMN review_paise bigint NOT NULL DEFAULT 0;
ALTER TABLE delegations DROP CONSTRAINT ck_delegation_budget_partitioned;
ALTER TABLE delegations ADD CONSTRAINT ck_delegation_budget_partitioned
    CHECK (allocated_paise + spent_paise <= budget_paise + review_paise);

-- Payments ---------------------------------------------------------------------

ALTER TABLE provider_orders ADD CONSTRAINT uq_provider_order_terms
    UNIQUE (tenant_id, provider_order_id, request_id, amount_paise, currency);

CREATE TABLE provider_payments (
    tenant_id text NOT NULL,
    provider_payment_id text NOT NULL,
    provider_order_id text NOT NULL,
    request_id text NOT NULL,
    amount_paise bigint NOT NULL,
    currency text NOT NULL,
    status text NOT NULL,
    -- 'webhook' or 'reconcile': how the gate learnt of it.
    source text NOT NULL,
    recorded_at timestamptz NOT NULL,
    CONSTRAINT pk_provider_payments PRIMARY KEY (tenant_id, provider_payment_id),
    CONSTRAINT uq_provider_payment_id UNIQUE (provider_payment_id),
    CONSTRAINT fk_provider_payment_matches_order
        FOREIGN KEY (tenant_id, provider_order_id, request_id, amount_paise, currency)
        REFERENCES provider_orders (tenant_id, provider_order_id, request_id, amount_paise, currency),
    CONSTRAINT ck_provider_payment_status_known CHECK (status IN ('captured', 'failed')),
    CONSTRAINT ck_provider_payment_source_known CHECK (source IN ('webhook', 'reconcile'))
);

CREATE INDEX ix_provider_payments_request ON provider_payments (tenant_id, request_id);

CREATE OR REPLACE FUNCTION request_state_transition() RETURNS trigger
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
        ('PROVIDER_PENDING', 'CAPTURED'), ('PROVIDER_PENDING', 'FAILED'),
        -- Money reached a request that had already ended.
        ('CAPTURED', 'NEEDS_REVIEW'), ('FAILED', 'NEEDS_REVIEW'),
        ('EXPIRED', 'NEEDS_REVIEW'), ('CANCELLED', 'NEEDS_REVIEW')) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
            MESSAGE = format('request_state_transition: request %s may not move from %s to %s',
                             OLD.id, OLD.state, NEW.state);
    END IF;
    IF NEW.state IN ('CAPTURED', 'NEEDS_REVIEW') AND NOT EXISTS (
        SELECT 1 FROM provider_payments p
         WHERE p.tenant_id = NEW.tenant_id AND p.request_id = NEW.id AND p.status = 'captured') THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
            MESSAGE = format('request_state_transition: request %s may become %s only by a recorded captured payment',
                             OLD.id, NEW.state);
    END IF;
    RETURN NEW;
END;
$$;

-- Event ids of any length --------------------------------------------------------

ALTER TABLE provider_events DROP CONSTRAINT ck_provider_event_id_not_blank;
ALTER TABLE provider_events DROP CONSTRAINT uq_provider_event_id;
ALTER TABLE provider_events
    ALTER COLUMN provider_event_id TYPE bytea USING convert_to(provider_event_id, 'UTF8');
ALTER TABLE provider_events ADD CONSTRAINT ck_provider_event_id_not_blank
    CHECK (octet_length(provider_event_id) > 0);
ALTER TABLE provider_events ADD COLUMN event_id_sha256 text
    GENERATED ALWAYS AS (encode(sha256(provider_event_id), 'hex')) STORED;
ALTER TABLE provider_events ADD CONSTRAINT uq_provider_event_id UNIQUE (event_id_sha256);

-- Captures kept for reconcile -----------------------------------------------------

CREATE TABLE kept_captures (
    tenant_id text NOT NULL,
    -- The event's id, as bytes, and its SHA-256 (derived by the database).
    provider_event_id bytea NOT NULL,
    event_id_sha256 text GENERATED ALWAYS AS (encode(sha256(provider_event_id), 'hex')) STORED,
    authority_id text NOT NULL,
    provider_order_id text NOT NULL,
    provider_payment_id text NOT NULL,
    amount_paise bigint NOT NULL,
    currency text NOT NULL,
    event_created_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    -- Set when reconcile has put the money on the books.
    settled_at timestamptz,
    CONSTRAINT pk_kept_captures PRIMARY KEY (tenant_id, event_id_sha256),
    CONSTRAINT uq_kept_capture_event UNIQUE (event_id_sha256),
    CONSTRAINT fk_kept_capture_authority_same_tenant FOREIGN KEY (tenant_id, authority_id)
        REFERENCES checkout_authorities (tenant_id, id),
    CONSTRAINT ck_kept_capture_amount_positive CHECK (amount_paise > 0)
);

CREATE INDEX ix_kept_captures_unsettled ON kept_captures (tenant_id) WHERE settled_at IS NULL;

-- review_paise starts at 0 (or at most what a new day holds), only grows, and
-- only in step with the spend it excuses: a writer cannot raise it to make
-- room for more reservations past a cap, and it is never negative.

CREATE FUNCTION daily_spend_review_in_step() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.review_paise < 0 OR NEW.review_paise > NEW.reserved_paise THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'daily_spend_review_in_step',
                MESSAGE = format('daily_spend_review_in_step: %s counts %s past its cap but holds only %s',
                                 NEW.day, NEW.review_paise, NEW.reserved_paise);
        END IF;
    ELSIF NEW.review_paise IS DISTINCT FROM OLD.review_paise
          AND (NEW.review_paise < OLD.review_paise
               OR NEW.review_paise - OLD.review_paise <> NEW.reserved_paise - OLD.reserved_paise) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'daily_spend_review_in_step',
            MESSAGE = format('daily_spend_review_in_step: review_paise of %s may only grow with reserved_paise', NEW.day);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER daily_spend_review_in_step
    BEFORE INSERT OR UPDATE ON daily_spend
    FOR EACH ROW EXECUTE FUNCTION daily_spend_review_in_step();

CREATE FUNCTION delegation_review_in_step() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.review_paise <> 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_review_in_step',
                MESSAGE = format('delegation_review_in_step: a new hop %s counts nothing past its budget', NEW.id);
        END IF;
    ELSIF NEW.review_paise IS DISTINCT FROM OLD.review_paise
          AND (NEW.review_paise < OLD.review_paise
               OR NEW.review_paise - OLD.review_paise <> NEW.spent_paise - OLD.spent_paise) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'delegation_review_in_step',
            MESSAGE = format('delegation_review_in_step: review_paise of hop %s may only grow with spent_paise', NEW.id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER delegation_review_in_step
    BEFORE INSERT OR UPDATE ON delegations
    FOR EACH ROW EXECUTE FUNCTION delegation_review_in_step();
