-- The hex-digest CHECKs, written so that Postgres evaluates them cheaply.
--
-- Guarantees: every constraint below keeps its name and accepts exactly the
-- values it accepted before: a text of exactly 64 characters, each one of
-- 0-9 or a-f (lowercase), or NULL where the column allows it. In Postgres'
-- regular expressions `$` matches only at the very end of the text, so a
-- trailing newline is refused by both forms. Tested by name, with the values
-- on each side of every edge (63, 64 and 65 characters, an uppercase digit, a
-- trailing newline, a NUL-free non-ASCII letter): gate/tests/integration/
-- db_hex_checks.rs.
--
-- Why: `x ~ '^[0-9a-f]{64}$'` makes Postgres' regex engine count up to 64 on
-- every row, about 6 µs per evaluation on this project's machines (100,000
-- evaluations: 640 ms), where `length(x) = 64 AND x ~ '^[0-9a-f]+$'` takes
-- about 0.5 µs (59 ms). An allowed proposal evaluates seven of them (its
-- request's two digests, two per ledger entry, the ledger head's hash), a
-- purchase flow about twenty; they were a tenth of the request insert's and
-- the ledger append's server time (measured in a loop of 2,000 statements
-- each: 230 → 202 ms and 300 → 250 ms).
--
-- The constraints are dropped and added back in one ALTER TABLE per table,
-- so the table is never without them; adding one checks every existing row.

ALTER TABLE payment_requests
    DROP CONSTRAINT ck_request_body_digest_hex,
    ADD CONSTRAINT ck_request_body_digest_hex
        CHECK (length(body_sha256) = 64 AND body_sha256 ~ '^[0-9a-f]+$'),
    DROP CONSTRAINT ck_request_purchase_digest_hex,
    ADD CONSTRAINT ck_request_purchase_digest_hex
        CHECK (length(purchase_digest) = 64 AND purchase_digest ~ '^[0-9a-f]+$');

ALTER TABLE checkout_authorities
    DROP CONSTRAINT ck_authority_digest_hex,
    ADD CONSTRAINT ck_authority_digest_hex
        CHECK (length(purchase_digest) = 64 AND purchase_digest ~ '^[0-9a-f]+$');

ALTER TABLE ledger_head
    DROP CONSTRAINT ck_ledger_head_hash_hex,
    ADD CONSTRAINT ck_ledger_head_hash_hex
        CHECK (length(hash) = 64 AND hash ~ '^[0-9a-f]+$');

ALTER TABLE ledger_entries
    DROP CONSTRAINT ck_ledger_hashes_hex,
    ADD CONSTRAINT ck_ledger_hashes_hex
        CHECK (length(prev_hash) = 64 AND prev_hash ~ '^[0-9a-f]+$'
               AND length(hash) = 64 AND hash ~ '^[0-9a-f]+$');

ALTER TABLE api_keys
    DROP CONSTRAINT ck_api_keys_sha256_hex,
    ADD CONSTRAINT ck_api_keys_sha256_hex
        CHECK (length(key_sha256) = 64 AND key_sha256 ~ '^[0-9a-f]+$');
