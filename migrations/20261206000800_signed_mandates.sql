-- Signed mandates: every policy version carries its signer and signature.
--
-- Guarantees:
--   * policy_versions keeps, beside each version's policy document, the
--     person who signed the mandate and the Ed25519 signature (base64) over
--     the mandate's canonical bytes (RFC 8785 JSON of the format, tenant,
--     version, signer and policy: the `mandate` crate). The database cannot
--     check a signature: the gate checks it on every read of a version with
--     the humans' public keys, which are its configuration and never rows,
--     and a version whose signature does not verify refuses every proposal
--     POLICY_INVALID. A row the gate's own login inserts without a valid
--     signature therefore publishes nothing.
--   * tenant_world sends the mandate (`{policy, signer, signature}`) where it
--     sent the policy, so the stamp a cached world is checked against covers
--     the signature too. policy_versions stays append-only
--     (policy_versions_append_only): a signature is never rewritten.
--   * Versions published before this migration carry no signature: they are
--     POLICY_INVALID until a signed mandate of a higher version is published.

ALTER TABLE policy_versions ADD COLUMN signer text, ADD COLUMN signature text;

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
                                   max_quantity, available, description
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
