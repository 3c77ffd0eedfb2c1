-- Guards that do their work only in the case they guard.
--
-- Guarantees (each guard keeps its name, its message and its test in
-- gate/tests/integration/db_guards*.rs and db_roles.rs; the mutation
-- registry deletes each by name as before):
--   * request_state_transition and request_captured_by_event refuse exactly
--     what they refused before. Their question "is a captured payment
--     recorded?" is now asked only when the request is becoming CAPTURED or
--     NEEDS_REVIEW. PL/pgSQL runs an IF condition holding a subquery as a
--     whole query, with an executor of its own, on every row, even when the
--     first test of the AND is false; an IF without one is a plain
--     expression. So the state test comes first, alone, and the EXISTS
--     inside it.
--   * delegation_partition_exact fires only on an UPDATE that writes a
--     column the partition is made of (tenant_id, id, parent_id,
--     allocated_paise, claim_paise), and on every INSERT as before. An UPDATE
--     of anything else (spent_paise, review_paise, revoked_at, revoked_by
--     alone) leaves every hop's allocation and its children's claims as
--     they were, and no BEFORE UPDATE trigger of delegations changes a
--     column (delegation_terms_immutable and delegation_review_in_step only
--     refuse), so the check it skips could only pass.
--
-- Why: measured with pgbench on a seeded copy, request_captured_by_event took
-- 28 µs of every INSERT into payment_requests (a denied proposal's one
-- write there), and every reservation and release of a hop (an UPDATE of
-- spent_paise) queued a partition check that read the hop's children at
-- commit.

CREATE OR REPLACE FUNCTION request_captured_by_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'CAPTURED' AND (TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM 'CAPTURED') THEN
        IF NOT EXISTS (
               SELECT 1 FROM provider_payments p
                WHERE p.tenant_id = NEW.tenant_id AND p.request_id = NEW.id
                  AND p.status = 'captured') THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_captured_by_event',
                MESSAGE = format('request_captured_by_event: request %s may become CAPTURED only once a '
                                 'captured payment is recorded for it', NEW.id);
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION request_state_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state IS NULL OR NEW.state NOT IN ('PROPOSED', 'DENIED', 'PENDING_APPROVAL') THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
                MESSAGE = format('request_state_transition: a request is created PROPOSED, DENIED or '
                                 'PENDING_APPROVAL, not %s', NEW.state);
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
    IF NEW.state IN ('CAPTURED', 'NEEDS_REVIEW') THEN
        IF NOT EXISTS (
            SELECT 1 FROM provider_payments p
             WHERE p.tenant_id = NEW.tenant_id AND p.request_id = NEW.id AND p.status = 'captured') THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
                MESSAGE = format('request_state_transition: request %s may become %s only by a recorded captured payment',
                                 OLD.id, NEW.state);
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

DROP TRIGGER delegation_partition_exact ON delegations;
CREATE CONSTRAINT TRIGGER delegation_partition_exact
    AFTER INSERT OR UPDATE OF tenant_id, id, parent_id, allocated_paise, claim_paise ON delegations
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION delegation_partition_exact();
