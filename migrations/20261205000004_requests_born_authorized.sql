-- A request may be born AUTHORIZED, holding its reservation.
--
-- Guarantees held by the database itself (tested in
-- gate/tests/integration/db_guards.rs by direct SQL):
--   * request_state_transition (replaced): a request is created PROPOSED,
--     DENIED, PENDING_APPROVAL or AUTHORIZED. CHECKOUT_ISSUED and every
--     later state are still reached only by a move along the allowed
--     transitions (CAPTURED also only by a recorded capture, which
--     request_captured_by_event checks first). Moves are unchanged.
--   * An AUTHORIZED birth holds exactly what an AUTHORIZED move holds:
--     ck_request_reservation_matches_state (its whole amount reserved, on a
--     day, from a hop), ck_request_authorized_at (the instant it was
--     authorized) and ck_request_live_has_purchase (merchant, amount,
--     currency, digest and policy version) check the row, whichever way it
--     reached the state.
--
-- Why: the gate inserted an allowed proposal PROPOSED and moved it to
-- AUTHORIZED in a second statement of the same transaction. The move added
-- no check: a role that may insert a request PROPOSED may move it to
-- AUTHORIZED, and the row it leaves is checked by the same constraints
-- either way. One statement fewer for every allowed proposal, while the
-- tenant's day lock is held.

CREATE OR REPLACE FUNCTION request_state_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state IS NULL OR NEW.state NOT IN ('PROPOSED', 'DENIED', 'PENDING_APPROVAL', 'AUTHORIZED') THEN
            RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_state_transition',
                MESSAGE = format('request_state_transition: a request is created PROPOSED, DENIED, '
                                 'PENDING_APPROVAL or AUTHORIZED, not %s', NEW.state);
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
