-- Checkout authorities, provider orders and provider events.
--
-- Guarantees held by the database itself (each named guard has a test in
-- gate/tests/db_guards.rs that violates it directly with SQL):
--   * uq_authority_per_request: a request gets at most one checkout authority;
--   * ck_authority_ttl: an authority expires after its issue and at most 15
--     minutes after it;
--   * ck_authority_consumed_once: an authority is consumed at most once;
--   * fk_authority_matches_request: an authority carries exactly the
--     merchant, amount, currency and purchase digest of its request;
--   * uq_provider_order_per_authority: one provider order per authority, and
--     fk_provider_order_matches_authority: the order carries exactly the
--     request, merchant, amount and currency of its authority;
--   * uq_provider_event_id: a provider event id is processed once, across
--     every tenant.
-- Every reference is a composite (tenant_id, ...) key.

CREATE TABLE checkout_authorities (
    tenant_id text NOT NULL,
    -- An unguessable id (an HMAC under the gate's secret), never a counter.
    id text NOT NULL,
    request_id text NOT NULL,
    issued_by text NOT NULL,
    merchant_id text NOT NULL,
    amount_paise bigint NOT NULL,
    currency text NOT NULL,
    -- SHA-256 of the canonical purchase the authority binds to.
    purchase_digest text NOT NULL,
    policy_version integer NOT NULL,
    issued_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    consumptions smallint NOT NULL DEFAULT 0,
    consumed_at timestamptz,
    -- Who consumed it: a human (consumed_by) or the requesting agent
    -- (consumed_by_agent), never both.
    consumed_by text,
    consumed_by_agent text,
    CONSTRAINT pk_checkout_authorities PRIMARY KEY (tenant_id, id),
    CONSTRAINT uq_checkout_authority_id UNIQUE (id),
    -- Target of fk_provider_order_matches_authority.
    CONSTRAINT uq_checkout_authority_terms UNIQUE (tenant_id, id, request_id, merchant_id, amount_paise, currency),
    CONSTRAINT uq_authority_per_request UNIQUE (tenant_id, request_id),
    CONSTRAINT fk_authority_matches_request
        FOREIGN KEY (tenant_id, request_id, merchant_id, amount_paise, currency, purchase_digest)
        REFERENCES payment_requests (tenant_id, id, merchant_id, amount_paise, currency, purchase_digest),
    CONSTRAINT fk_authority_issuer_same_tenant FOREIGN KEY (tenant_id, issued_by)
        REFERENCES people (tenant_id, id),
    CONSTRAINT fk_authority_consumer_same_tenant FOREIGN KEY (tenant_id, consumed_by)
        REFERENCES people (tenant_id, id),
    CONSTRAINT fk_authority_agent_consumer_same_tenant FOREIGN KEY (tenant_id, consumed_by_agent)
        REFERENCES agents (tenant_id, id),
    CONSTRAINT ck_authority_one_consumer CHECK (consumed_by IS NULL OR consumed_by_agent IS NULL),
    CONSTRAINT fk_authority_policy_same_tenant FOREIGN KEY (tenant_id, policy_version)
        REFERENCES policy_versions (tenant_id, version),
    CONSTRAINT ck_authority_ttl CHECK (
        expires_at > issued_at AND expires_at <= issued_at + interval '15 minutes'),
    CONSTRAINT ck_authority_consumed_once CHECK (
        consumptions IN (0, 1) AND (consumptions = 1) = (consumed_at IS NOT NULL)),
    CONSTRAINT ck_authority_digest_hex CHECK (purchase_digest ~ '^[0-9a-f]{64}$')
);

CREATE TABLE provider_orders (
    tenant_id text NOT NULL,
    provider_order_id text NOT NULL,
    authority_id text NOT NULL,
    request_id text NOT NULL,
    merchant_id text NOT NULL,
    amount_paise bigint NOT NULL,
    currency text NOT NULL,
    status text NOT NULL DEFAULT 'CREATED',
    created_at timestamptz NOT NULL,
    CONSTRAINT pk_provider_orders PRIMARY KEY (tenant_id, provider_order_id),
    CONSTRAINT uq_provider_order_id UNIQUE (provider_order_id),
    CONSTRAINT uq_provider_order_per_authority UNIQUE (tenant_id, authority_id),
    CONSTRAINT fk_provider_order_matches_authority
        FOREIGN KEY (tenant_id, authority_id, request_id, merchant_id, amount_paise, currency)
        REFERENCES checkout_authorities (tenant_id, id, request_id, merchant_id, amount_paise, currency),
    CONSTRAINT ck_provider_order_status_known CHECK (status IN ('CREATED', 'CAPTURED', 'FAILED'))
);

CREATE TABLE provider_events (
    tenant_id text NOT NULL,
    provider_event_id text NOT NULL,
    provider_order_id text NOT NULL,
    request_id text NOT NULL,
    event text NOT NULL,
    amount_paise bigint NOT NULL,
    currency text NOT NULL,
    -- The event's own timestamp, as the provider stamped it.
    event_created_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    -- 'applied', or the reason code it was refused with.
    outcome text NOT NULL,
    body_sha256 text NOT NULL,
    CONSTRAINT uq_provider_event_id UNIQUE (provider_event_id),
    CONSTRAINT fk_provider_event_order_same_tenant FOREIGN KEY (tenant_id, provider_order_id)
        REFERENCES provider_orders (tenant_id, provider_order_id),
    CONSTRAINT fk_provider_event_request_same_tenant FOREIGN KEY (tenant_id, request_id)
        REFERENCES payment_requests (tenant_id, id),
    CONSTRAINT ck_provider_event_id_not_blank CHECK (btrim(provider_event_id) <> '')
);

CREATE INDEX ix_provider_events_request ON provider_events (tenant_id, request_id);
