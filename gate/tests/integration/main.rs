//! The gate's integration tests, in one test binary (`cargo test -p gate
//! --test integration`): one link instead of one per file, which is most of
//! what a mutant's build costs (cargo-mutants rebuilds every test target of
//! the crate for each mutant). Each module is one concern, named for what it
//! proves; `support` holds the shared ceremony (a fresh database seeded with
//! the standard world, dropped after) and `fake_razorpay` the provider's API
//! on a loopback port.

mod fake_razorpay;
mod support;

mod audit_findings;
mod bundle_files;
mod checkpointer;
mod core_refusals;
mod db_counters;
mod db_factory;
mod db_guards;
mod db_guards_state;
mod db_hex_checks;
mod db_money_terms;
mod db_privileges;
mod db_provider_guards;
mod db_raw_bodies;
mod db_roles;
mod db_tenancy;
mod db_unnamed_guards;
mod db_urls_and_migrations;
mod demo_provider;
mod distribution;
mod flow_approve;
mod flow_checkout;
mod flow_delegation;
mod flow_end_to_end;
mod flow_errors;
mod flow_propose;
mod flow_provider;
mod flow_reconcile;
mod flow_webhook;
mod flow_world_cache;
mod gate_handle;
mod hostile_input;
mod in_process_provider;
mod ledger;
mod lifetimes;
mod mandates;
mod onboarding;
mod onboarding_pool;
mod outside_audit_gaps;
mod outside_audit_pure;
mod outside_gate;
mod outside_webhook;
mod pages_reads;
mod policy_properties;
mod provider_book;
mod provider_lies;
mod race_mixed;
mod races;
mod razorpay_contract;
mod razorpay_keys_env;
mod razorpay_live;
mod refused_by_the_database;
mod registry_gaps;
mod row_locks;
mod sequencer;
mod service_views;
mod stolen_login;
mod tenant_turns;
mod tlog_proofs;
mod webhook_envelope;
