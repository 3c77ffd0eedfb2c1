-- A capture kept for reconcile has the signed event that kept it.
--
-- * kept_capture_carried_by_event: the webhook keeps a signed capture for
--   an order the gate has not recorded in the transaction that queues its
--   `provider_event.kept` ledger entry, and reconcile books what is kept.
--   At commit, a kept row (inserted, or with its tenant, event, authority,
--   order, payment, amount or currency changed) must have that entry: a
--   queued row of the tenant (ledger_queue) or, once integrated, a ledger
--   entry of the tenant, of kind `provider_event.kept`, whose text names
--   the row's event id digest, authority, order, payment, amount and
--   currency. The text is matched as written, never cast, so no row of the
--   queue can make the check fail for another. A row the runtime role
--   queues without the gate's MAC satisfies this check but is never
--   integrated, and the sequencer and `spendgate ledger verify` name it;
--   the trigger refuses a kept capture a login writes with no entry at all,
--   and `gate::service::audit` names a kept row without its integrated
--   entry whether or not the trigger is enabled.

CREATE FUNCTION kept_capture_entry_names(txt text, k kept_captures) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT strpos(txt, '"event_id_sha256":' || to_jsonb(k.event_id_sha256)::text) > 0
       AND strpos(txt, '"authority":' || to_jsonb(k.authority_id)::text) > 0
       AND strpos(txt, '"order_id":' || to_jsonb(k.provider_order_id)::text) > 0
       AND strpos(txt, '"payment_id":' || to_jsonb(k.provider_payment_id)::text) > 0
       AND strpos(txt, '"amount_paise":' || k.amount_paise::text || ',') > 0
       AND strpos(txt, '"currency":' || to_jsonb(k.currency)::text) > 0
$$;

CREATE FUNCTION kept_capture_carried_by_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    k kept_captures;
BEGIN
    -- The row as it stands at commit (a later statement may have changed it).
    SELECT * INTO k FROM kept_captures
     WHERE event_id_sha256 = NEW.event_id_sha256;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (
        SELECT 1 FROM ledger_queue q
         WHERE q.tenant_id = k.tenant_id AND q.kind = 'provider_event.kept'
           AND kept_capture_entry_names(q.body, k)) THEN
        RETURN NULL;
    END IF;
    IF EXISTS (
        SELECT 1 FROM ledger_entries l
         WHERE l.tenant_id = k.tenant_id AND l.kind = 'provider_event.kept'
           AND kept_capture_entry_names(l.entry, k)) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'kept_capture_carried_by_event',
        MESSAGE = format('kept_capture_carried_by_event: the capture kept for authority %s of '
                         'tenant %s has no provider_event.kept entry naming it',
                         k.authority_id, k.tenant_id);
END;
$$;

CREATE CONSTRAINT TRIGGER kept_capture_carried_by_event
    AFTER INSERT OR UPDATE OF tenant_id, provider_event_id, authority_id, provider_order_id,
        provider_payment_id, amount_paise, currency ON kept_captures
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    EXECUTE FUNCTION kept_capture_carried_by_event();

ALTER TABLE kept_captures ENABLE ALWAYS TRIGGER kept_capture_carried_by_event;
