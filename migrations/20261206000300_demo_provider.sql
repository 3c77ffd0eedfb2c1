-- The demo provider's book: the orders a payment provider would hold, kept in
-- the gate's database so that a gate run with `provider = "demo"` loses
-- nothing across a restart (gate::provider::DemoProvider).
--
-- Its own schema, because it is not the gate's books: the gate never reads it
-- to decide anything, and no guard of the gate's relies on it. It stands where
-- Razorpay's servers stand for `provider = "razorpay"`.

CREATE SCHEMA demo_provider;
GRANT USAGE ON SCHEMA demo_provider TO spendgate_app;

CREATE TABLE demo_provider.orders (
    id           text PRIMARY KEY,
    receipt      text NOT NULL,
    merchant     text NOT NULL,
    amount_paise bigint NOT NULL,
    currency     text NOT NULL,
    -- Unix seconds, as Razorpay stamps its entities.
    created_at   bigint NOT NULL,
    -- One order per receipt: a create sent again for the same authority
    -- answers the order it made the first time.
    CONSTRAINT uq_demo_order_receipt UNIQUE (receipt),
    CONSTRAINT ck_demo_order_amount_positive CHECK (amount_paise > 0)
);

GRANT SELECT, INSERT ON demo_provider.orders TO spendgate_app;

-- A served gate checks, before it listens, that every migration of its build
-- is applied: the application role may read the migrations' record (never
-- write it).
GRANT SELECT ON _sqlx_migrations TO spendgate_app;
