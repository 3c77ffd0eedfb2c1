-- A decision's reads of the agent's recent proposals walk their index newest
-- first and stop at the policy's limits, whatever the planner last saw.
--
-- Guarantees (tested by service::decision_state's database test
-- a_decision_never_scans_the_requests_a_planner_saw_empty):
--   * decision_state's statements are planned with explicit sorts off
--     (enable_sort = off, for this function only, beside its
--     enable_seqscan = off and plan_cache_mode = force_generic_plan). The
--     two reads of the agent's recent proposals are then always a backward
--     walk of ix_payment_requests_agent_time that stops at its LIMIT: the
--     only plan that needs no sort. The reads that have no index in their
--     order (the agent's delegation hops, a handful of rows) still sort:
--     the setting makes a sort look dear, never impossible.
--   * Its statements are never compiled by JIT (jit = off, for this
--     function only). A disabled plan node costs 10^10 in the planner's
--     units, far past jit_above_cost, so each run of a plan that still sorts
--     (the hops' read) or scans would be compiled afresh: 72 ms a decision,
--     where the statement itself takes 0.1 ms. Nothing else about the
--     function changes: its text, its lock order, its results.
--
-- Why: a generic plan made while the table's statistics said it was empty
-- (relpages = 0, as a VACUUM or ANALYZE of a new deployment leaves them: the
-- planner then counts the pages the table has at that moment) found a walk
-- of the idempotency key's unique index by the tenant and the agent, a
-- filter on the window and a sort cheapest once the table had about 7
-- pages, and kept it as the table grew: every decision read every proposal
-- of the agent in the window, not the newest 20 and 5. The test above makes
-- that plan on 300 requests: it fetched all 600 of the two reads' rows
-- where the backward walk fetches 25. In the load benchmark (limits a
-- million, so only the window bounds the read) some connections kept that
-- plan, and their reads took up to 2 ms at the end of a 4-second cell
-- (auto_explain, 2026-12-05).

ALTER FUNCTION decision_state(text, text, date, text, bigint, boolean, timestamptz, bigint, bigint,
                              text, integer)
    SET enable_sort = off
    SET jit = off;
