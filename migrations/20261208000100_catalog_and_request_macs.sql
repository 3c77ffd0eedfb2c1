-- What makes a purchase carries the gate's MAC: the catalog rows a purchase
-- is derived from, and the request rows that record what a decision derived.
--
-- Each row carries `row_mac`: an HMAC-SHA256 under the row key derived from
-- the ledger key (which the gate holds and the database never does), as
-- api_keys and checkout_authorities do (`*_row_macs.sql`):
--   * catalog_items: tenant, sku, merchant, price, currency, category,
--     maximum quantity and availability (everything the derivation reads;
--     the description decides nothing). Written by every writer that holds
--     the key (the seed, `tenant apply`, `set_price`). A proposal for a sku
--     whose row does not verify is PRICE_INVALID; an authority on it is
--     refused AUTHORITY_PURCHASE_CHANGED at checkout and at pay.
--   * payment_requests: tenant, request, agent, sku, quantity, merchant,
--     amount, currency, purchase digest, policy version and the gate's
--     standing of it (`allow` once the gate authorized it, at birth or at
--     approval; else its first decision). Written by the statement that
--     records the proposal and rewritten by approval. Approve, checkout and
--     pay refuse a request whose MAC does not verify
--     AUTHORITY_PURCHASE_CHANGED before any authority is issued or any
--     provider is called.
-- A database login can write any value here, but not one that verifies;
-- `spendgate ledger verify` names every such row, and every catalog price
-- that is not the price the ledger last recorded for it. Rows written
-- before this migration carry none and verify as nothing.
--
-- tenant_world sends each catalog row's MAC, so the stamp a cached world is
-- checked against covers it.

ALTER TABLE catalog_items ADD COLUMN row_mac text;
ALTER TABLE payment_requests ADD COLUMN row_mac text;

CREATE OR REPLACE FUNCTION tenant_world(p_tenant text)
RETURNS TABLE (version integer, policy jsonb, catalog json, digest text)
LANGUAGE sql
STABLE
AS $$
    SELECT w.version, w.policy, w.catalog,
           encode(sha256(convert_to(concat_ws(E'\n', 'spendgate world v1', w.version::text,
                                              w.policy::text, w.catalog::text), 'UTF8')), 'hex')
      FROM (SELECT v.version, v.policy,
                   (SELECT COALESCE(json_agg(c ORDER BY c.sku), '[]')
                      FROM (SELECT sku, merchant_id, price_paise, currency, category,
                                   max_quantity, available, description, row_mac
                              FROM catalog_items WHERE tenant_id = p_tenant) c) AS catalog
              FROM (SELECT 1) AS one
              LEFT JOIN LATERAL (
                   SELECT pv.version,
                          jsonb_build_object('policy', pv.policy, 'signer', pv.signer,
                                             'signature', pv.signature) AS policy
                     FROM policy_versions pv
                    WHERE pv.tenant_id = p_tenant
                    ORDER BY pv.version DESC LIMIT 1) v ON true) w
$$;

SELECT world_restamp(NULL);
