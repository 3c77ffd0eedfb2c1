-- A decision's reads are index walks whatever the planner last saw of the
-- tables.
--
-- Guarantees (tested by service::decision_state's database test
-- a_decision_never_scans_the_requests_a_planner_saw_empty):
--   * decision_state's statements are planned with sequential scans off
--     (enable_seqscan = off, for this function only, beside its
--     plan_cache_mode = force_generic_plan). Every one of them is a lookup
--     or a walk of an index by the tenant (and the agent): the day's key,
--     the idempotency key's unique index, the delegations of the grantee,
--     ix_payment_requests_agent_time. Nothing else about the function
--     changes: its text, its lock order, its results.
--
-- Why: decision_state runs each statement's generic plan, made once per
-- connection and kept until something invalidates it. A table that
-- autovacuum or ANALYZE saw empty (a new deployment, a restore) has
-- statistics that make a sequential scan look free, so the plan made then
-- read every request of every tenant for each decision, for as long as the
-- connection lived or until the next analyze: in the load benchmark, one
-- client on a database analyzed while empty made 537 proposals/s with the
-- backend at 83% of a CPU, and 852/s with this setting, measured back to
-- back on one server on 2026-12-05. A table never analyzed (the migrations'
-- fresh copy) was planned with its indexes either way.

ALTER FUNCTION decision_state(text, text, date, text, bigint, boolean, timestamptz, bigint, bigint,
                              text, integer)
    SET enable_seqscan = off;
