-- A request may be created in the state its first decision gives it, when
-- that state holds no money and grants nothing.
--
-- Guarantees held by the database itself (tested in
-- gate/tests/integration/db_guards.rs by direct SQL):
--   * request_state_transition (replaced): a request is created PROPOSED,
--     DENIED or PENDING_APPROVAL. The two decided states are those a
--     proposal's first decision moves it to without a reservation: a refusal
--     and a wait for a human. Every state that holds a reservation or grants
--     spending (AUTHORIZED onwards) is still reached only by a move along
--     the allowed transitions, so a request is never born able to spend.
--     Until now every proposal was inserted PROPOSED and moved by a second
--     statement in the same transaction; a refused or stepped-up proposal is
--     now one statement, and the row it leaves is the same.
--   * Everything else is as 20261130000020_provider_payments.sql left it.

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
