-- The bytes as received: each recorded proposal's body, and each recorded
-- provider event's body and signature header, exactly as they arrived, for
-- the receipt and the evidence bundle.
--
-- Guarantees held by the database itself (each named guard has a test in
-- gate/tests/integration/db_raw_bodies.rs that violates it directly with SQL):
--   * a kept proposal body is the one its request's digest names: the hex
--     SHA-256 of the bytes is the request's body_sha256, in the same tenant
--     (request_body_matches_digest);
--   * a kept event body is the one its recorded event's digest names, in the
--     same tenant (provider_event_body_matches_digest);
--   * bounded by the limits the service already has: a proposal body at most
--     4096 bytes (the tool boundary's MAX_BODY_BYTES: a longer body is
--     refused PROPOSAL_TOO_LARGE and only its digest is kept), an event body
--     at most 65536 bytes (the HTTP service's BODY_LIMIT_BYTES) and its
--     signature header at most 1024 bytes (ck_request_body_bounded,
--     ck_provider_event_body_bounded);
--   * append-only for the runtime role: it may SELECT and INSERT (the
--     schema's default privileges, which the onboarding role mirrors) and
--     holds no UPDATE or DELETE.
--
-- The guards that compare digests are constraint triggers fired at the end
-- of the statement: the gate inserts a request (or an event) and its bytes
-- in one statement, and the check sees both rows.

CREATE TABLE request_bodies (
    tenant_id text NOT NULL,
    request_id text NOT NULL,
    body bytea NOT NULL,
    CONSTRAINT pk_request_body PRIMARY KEY (tenant_id, request_id),
    CONSTRAINT fk_request_body_request FOREIGN KEY (tenant_id, request_id)
        REFERENCES payment_requests (tenant_id, id),
    CONSTRAINT ck_request_body_bounded CHECK (octet_length(body) <= 4096)
);

CREATE FUNCTION request_body_matches_digest() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM payment_requests r
         WHERE r.tenant_id = NEW.tenant_id AND r.id = NEW.request_id
           AND r.body_sha256 = encode(sha256(NEW.body), 'hex')) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'request_body_matches_digest',
            MESSAGE = format('request_body_matches_digest: the bytes kept for request %s are not '
                             'the ones its body_sha256 names', NEW.request_id);
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER request_body_matches_digest
    AFTER INSERT OR UPDATE ON request_bodies
    FOR EACH ROW EXECUTE FUNCTION request_body_matches_digest();

ALTER TABLE request_bodies ENABLE ALWAYS TRIGGER request_body_matches_digest;

-- Keyed like provider_events' own (tenant, event) pair; the event itself is
-- found by the trigger, which also names the tenant.
CREATE TABLE provider_event_bodies (
    tenant_id text NOT NULL,
    event_id_sha256 text NOT NULL,
    body bytea NOT NULL,
    -- The X-Razorpay-Signature header's value, as received.
    signature bytea NOT NULL,
    CONSTRAINT pk_provider_event_body PRIMARY KEY (tenant_id, event_id_sha256),
    CONSTRAINT ck_provider_event_body_bounded
        CHECK (octet_length(body) <= 65536 AND octet_length(signature) <= 1024)
);

CREATE FUNCTION provider_event_body_matches_digest() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM provider_events e
         WHERE e.event_id_sha256 = NEW.event_id_sha256 AND e.tenant_id = NEW.tenant_id
           AND e.body_sha256 = encode(sha256(NEW.body), 'hex')) THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation',
            CONSTRAINT = 'provider_event_body_matches_digest',
            MESSAGE = format('provider_event_body_matches_digest: the bytes kept for event %s are '
                             'not the ones its recorded body_sha256 names', NEW.event_id_sha256);
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER provider_event_body_matches_digest
    AFTER INSERT OR UPDATE ON provider_event_bodies
    FOR EACH ROW EXECUTE FUNCTION provider_event_body_matches_digest();

ALTER TABLE provider_event_bodies ENABLE ALWAYS TRIGGER provider_event_body_matches_digest;
