-- Money terms are immutable once decided.
--
-- A request's terms (who asked, what, how many, for what purpose, and the
-- merchant, amount, currency and purchase digest the gate derived) and a
-- checkout authority's terms (its request, issuer, merchant, amount,
-- currency, digest, policy version and lifetime) are written once, by the
-- statement that records them, and never change. The gate never updates
-- them; these triggers refuse whoever else tries, the gate's own database
-- login included:
--   * request_terms_immutable on payment_requests;
--   * authority_terms_immutable on checkout_authorities.
-- Each fires only for an UPDATE that names one of the columns it guards, so
-- the state moves the gate makes (which name none of them) pay nothing.

CREATE FUNCTION request_terms_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.tenant_id, NEW.id, NEW.agent_id, NEW.idempotency_key, NEW.body_sha256, NEW.created_at)
           IS DISTINCT FROM (OLD.tenant_id, OLD.id, OLD.agent_id, OLD.idempotency_key, OLD.body_sha256, OLD.created_at)
       OR (NEW.sku, NEW.quantity, NEW.purpose)
           IS DISTINCT FROM (OLD.sku, OLD.quantity, OLD.purpose)
       OR (NEW.merchant_id, NEW.currency, NEW.amount_paise, NEW.purchase_digest)
           IS DISTINCT FROM (OLD.merchant_id, OLD.currency, OLD.amount_paise, OLD.purchase_digest) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_terms_immutable',
            MESSAGE = format('request_terms_immutable: the terms of request %s (what was asked, and the merchant, amount and currency derived for it) never change', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER request_terms_immutable
    BEFORE UPDATE OF tenant_id, id, agent_id, idempotency_key, body_sha256, created_at,
                     sku, quantity, purpose, merchant_id, currency, amount_paise, purchase_digest
    ON payment_requests
    FOR EACH ROW EXECUTE FUNCTION request_terms_immutable();

CREATE FUNCTION authority_terms_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.tenant_id, NEW.id, NEW.request_id, NEW.issued_by)
           IS DISTINCT FROM (OLD.tenant_id, OLD.id, OLD.request_id, OLD.issued_by)
       OR (NEW.merchant_id, NEW.amount_paise, NEW.currency, NEW.purchase_digest, NEW.policy_version)
           IS DISTINCT FROM (OLD.merchant_id, OLD.amount_paise, OLD.currency, OLD.purchase_digest, OLD.policy_version)
       OR (NEW.issued_at, NEW.expires_at) IS DISTINCT FROM (OLD.issued_at, OLD.expires_at) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'authority_terms_immutable',
            MESSAGE = format('authority_terms_immutable: the terms of checkout authority %s (its request, merchant, amount, currency, digest and lifetime) never change', OLD.id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER authority_terms_immutable
    BEFORE UPDATE OF tenant_id, id, request_id, issued_by, merchant_id, amount_paise, currency,
                     purchase_digest, policy_version, issued_at, expires_at
    ON checkout_authorities
    FOR EACH ROW EXECUTE FUNCTION authority_terms_immutable();
