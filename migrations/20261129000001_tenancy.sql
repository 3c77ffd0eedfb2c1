-- Tenancy: who and what exists inside which tenant.
--
-- Guarantees held by the database itself (each constraint is named, and each
-- has a test in gate/tests/db_tenancy.rs that violates it directly with SQL):
--   * every row belongs to exactly one tenant, and every reference between
--     rows is a composite foreign key on (tenant_id, ...), so no row can point
--     at a row of another tenant (fk_catalog_merchant_same_tenant and friends);
--   * ids are text and never blank; money is bigint minor units (paise for
--     INR, cents for USD), and a price is strictly positive;
--   * a currency is three uppercase letters; a quantity limit is positive.
-- Later migrations (policies, delegations, payment requests, ledger) build on
-- these keys: reference people, agents, merchants and catalog items through
-- (tenant_id, id) / (tenant_id, sku), never through a bare id.

CREATE TABLE tenants (
    id text NOT NULL,
    CONSTRAINT pk_tenants PRIMARY KEY (id),
    CONSTRAINT ck_tenants_id_not_blank CHECK (btrim(id) <> '')
);

-- Humans of a tenant. may_approve: may approve a step-up and root a
-- delegation. is_operator: may administer the tenant (grant, revoke, policy).
CREATE TABLE people (
    tenant_id text NOT NULL,
    id text NOT NULL,
    display_name text NOT NULL,
    may_approve boolean NOT NULL DEFAULT false,
    is_operator boolean NOT NULL DEFAULT false,
    CONSTRAINT pk_people PRIMARY KEY (tenant_id, id),
    CONSTRAINT fk_people_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_people_id_not_blank CHECK (btrim(id) <> ''),
    CONSTRAINT ck_people_display_name_not_blank CHECK (btrim(display_name) <> '')
);

-- AI agents of a tenant: they may propose purchases and nothing else.
CREATE TABLE agents (
    tenant_id text NOT NULL,
    id text NOT NULL,
    CONSTRAINT pk_agents PRIMARY KEY (tenant_id, id),
    CONSTRAINT fk_agents_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_agents_id_not_blank CHECK (btrim(id) <> '')
);

-- Merchants a tenant knows. Whether a merchant is *allowed* is policy, not here.
CREATE TABLE merchants (
    tenant_id text NOT NULL,
    id text NOT NULL,
    display_name text NOT NULL,
    CONSTRAINT pk_merchants PRIMARY KEY (tenant_id, id),
    CONSTRAINT fk_merchants_tenant FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    CONSTRAINT ck_merchants_id_not_blank CHECK (btrim(id) <> '')
);

-- The catalog: the only source of merchant, unit price, currency and category
-- for a purchase. The agent names a sku; everything else is read from here.
-- description is supplier-written and untrusted: it is data, never instructions.
CREATE TABLE catalog_items (
    tenant_id text NOT NULL,
    sku text NOT NULL,
    merchant_id text NOT NULL,
    price_paise bigint NOT NULL,
    currency char(3) NOT NULL,
    category text NOT NULL,
    max_quantity integer NOT NULL,
    available boolean NOT NULL DEFAULT true,
    description text NOT NULL DEFAULT '',
    CONSTRAINT pk_catalog_items PRIMARY KEY (tenant_id, sku),
    CONSTRAINT fk_catalog_merchant_same_tenant FOREIGN KEY (tenant_id, merchant_id)
        REFERENCES merchants (tenant_id, id),
    CONSTRAINT ck_catalog_sku_not_blank CHECK (btrim(sku) <> ''),
    CONSTRAINT ck_catalog_price_positive CHECK (price_paise > 0),
    CONSTRAINT ck_catalog_currency_uppercase CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT ck_catalog_category_not_blank CHECK (btrim(category) <> ''),
    CONSTRAINT ck_catalog_max_quantity_positive CHECK (max_quantity > 0)
);

-- Serves fk_catalog_merchant_same_tenant when a merchant row changes.
CREATE INDEX ix_catalog_items_merchant ON catalog_items (tenant_id, merchant_id);
