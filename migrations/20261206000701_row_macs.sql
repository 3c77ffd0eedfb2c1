-- What authorizes money carries the gate's MAC.
--
-- Each API key row and each checkout authority carries `row_mac`: an
-- HMAC-SHA256, keyed with a key derived from the ledger key (which the gate
-- holds and the database never does), over the columns that make the row
-- what it is:
--   * api_keys: the key id, tenant, actor kind (text: any kind), actor and
--     digest. A row whose MAC does not verify is no key: the gate answers
--     it as an unknown key and records the refusal on the tenant's ledger.
--   * checkout_authorities: the authority id, tenant, request, purchase
--     digest, amount, currency, merchant, policy version and expiry. `pay`
--     refuses an authority whose MAC does not verify
--     AUTHORITY_PURCHASE_CHANGED, before any provider call.
-- A login that writes rows can write any value here, but not one that
-- verifies; `spendgate ledger verify` names every row whose MAC does not.
-- Rows written before this migration have none: they verify as nothing
-- (re-issue such keys; such authorities are refused at pay).

ALTER TABLE api_keys ADD COLUMN row_mac text;
ALTER TABLE checkout_authorities ADD COLUMN row_mac text;
