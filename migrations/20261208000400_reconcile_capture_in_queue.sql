-- A capture reconcile learnt from the provider is carried by reconcile's
-- own entry for the order's authority.
--
-- provider_payment_carried_by_event (20261208000200_counters_agree.sql)
-- accepts a captured payment with source 'reconcile' when reconcile's entry
-- for its order's authority is on the tenant's ledger. Reconcile appends
-- that entry in the transaction that books the capture, and an operation's
-- entries go to ledger_queue (the sequencer integrates them later, in their
-- own transaction), so at commit the entry is a queued row of the tenant,
-- or, once integrated, the tenant's newest ledger entry. The queue holds
-- only what the sequencer has not integrated yet (a second's worth), so the
-- look-up reads a handful of rows.
--
-- A row the runtime role inserts into the queue without the gate's MAC
-- satisfies this trigger, but is never integrated and is named by the
-- sequencer and by `spendgate ledger verify`; the trigger refuses what a
-- login writes without any entry at all.

CREATE OR REPLACE FUNCTION provider_payment_carried_by_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    authority text;
BEGIN
    -- The row as it stands at commit (a later statement may have changed it).
    IF NOT EXISTS (
        SELECT 1 FROM provider_payments p
         WHERE p.tenant_id = NEW.tenant_id AND p.provider_payment_id = NEW.provider_payment_id
           AND p.status = 'captured') THEN
        RETURN NULL;
    END IF;
    IF EXISTS (
        SELECT 1 FROM provider_events e
         WHERE e.tenant_id = NEW.tenant_id AND e.request_id = NEW.request_id
           AND e.provider_order_id = NEW.provider_order_id AND e.outcome = 'applied'
           AND e.event IN ('payment.captured', 'order.paid', 'payment.authorized')) THEN
        RETURN NULL;
    END IF;
    IF EXISTS (
        SELECT 1 FROM kept_captures k
         WHERE k.tenant_id = NEW.tenant_id AND k.provider_payment_id = NEW.provider_payment_id
           AND k.provider_order_id = NEW.provider_order_id) THEN
        RETURN NULL;
    END IF;
    IF NEW.source = 'reconcile' THEN
        SELECT o.authority_id INTO authority FROM provider_orders o
         WHERE o.tenant_id = NEW.tenant_id AND o.provider_order_id = NEW.provider_order_id;
        -- The subject is kept as the JSON text the gate serialized: compared
        -- as text, never cast (a queued subject may hold an escaped NUL).
        IF EXISTS (
            SELECT 1 FROM ledger_queue q
             WHERE q.tenant_id = NEW.tenant_id AND q.kind = 'reconcile'
               AND q.subject = to_jsonb(authority)::text) THEN
            RETURN NULL;
        END IF;
        IF EXISTS (
            SELECT 1 FROM (SELECT l.kind, l.entry FROM ledger_entries l
                            WHERE l.tenant_id = NEW.tenant_id
                            ORDER BY l.seq DESC LIMIT 1) newest
             WHERE newest.kind = 'reconcile' AND newest.entry::jsonb ->> 'subject' = authority) THEN
            RETURN NULL;
        END IF;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'provider_payment_carried_by_event',
        MESSAGE = format('provider_payment_carried_by_event: payment %s of tenant %s is captured '
                         'without the event that carried it', NEW.provider_payment_id, NEW.tenant_id);
END;
$$;
