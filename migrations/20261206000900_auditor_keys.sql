-- A key's kind: what the service lets it do.
--
-- Guarantees held by the database itself (each named guard has a test in
-- wire/tests/db_guards.rs that violates it directly with SQL):
--   * every key has exactly one kind, a plain text value: 'agent' (an
--     agent's key: the agent routes), 'human' (a person's key: the human
--     routes and the pages) or 'auditor' (a person's read-only key: the
--     pages only, no gate operation) (ck_api_keys_kind);
--   * the kind agrees with the actor the key names: an agent's key is
--     'agent', a person's key is 'human' or 'auditor' (ck_api_keys_kind);
--   * a key's kind never changes once written (api_keys_kind_immutable), as
--     its tenant, actor and digest never do.

ALTER TABLE api_keys ADD COLUMN kind text;

UPDATE api_keys SET kind = CASE WHEN agent_id IS NOT NULL THEN 'agent' ELSE 'human' END;

ALTER TABLE api_keys
    ALTER COLUMN kind SET NOT NULL,
    -- With ck_api_keys_one_actor (exactly one of agent_id, person_id), an
    -- agent's key is 'agent' and a person's 'human' or 'auditor'.
    ADD CONSTRAINT ck_api_keys_kind CHECK (
        (kind = 'agent' AND agent_id IS NOT NULL)
        OR (kind IN ('human', 'auditor') AND agent_id IS NULL)
    );

CREATE FUNCTION api_keys_kind_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind IS DISTINCT FROM OLD.kind THEN
        RAISE EXCEPTION 'api key %: its kind never changes', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'api_keys_kind_immutable';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER api_keys_kind_immutable
    BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_kind_immutable();
