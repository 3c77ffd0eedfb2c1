# spendgate: the commands contributors and CI run. `make` alone lists them.
#
# Targets that need Postgres run under `harness db run`: it uses DATABASE_URL
# when it is set, and otherwise starts a throwaway cluster from the machine's
# Postgres binaries (unix socket only) and removes it afterwards.

CARGO ?= cargo
HARNESS = $(CARGO) run -q -p harness --
WITH_DB = $(HARNESS) db run --
# Extra arguments for triage, bench, reports and mutation: make bench ARGS='--corpus x'
ARGS ?=
# harness perf's arguments for make bench (--db: the database load phase beside pgbench;
# --http: the service on loopback beside the in-process gate).
PERF_ARGS ?= --db --http

.DEFAULT_GOAL := help
.PHONY: help mutants-audit verify fmt-check clippy test bench-http triage reports bench mutation mutation-verify mutation-report mutation-corpus db-up db-down fuzz fuzz-replay

help:
	@echo 'make verify     formatting, clippy (-D warnings), every test against Postgres, then'
	@echo '                every registered guard deleted (schemata mode) plus a cross-mode sample'
	@echo 'make test       every test against Postgres (cargo test --workspace)'
	@echo 'make bench-http the committed corpus through the HTTP service, compared with the database engine'
	@echo 'make triage     the guided tour: an unguarded purchase tool, then the gate'
	@echo 'make reports    regenerate reports/ (benchmark, attack matrix, generated corpus, mutations)'
	@echo '                and docs/scenario-format.md (harness scenario-format)'
	@echo 'make bench      the corpus through the gate, then speed figures (reports/performance.md)'
	@echo 'make mutation   delete each registered guard in turn, rebuilding each (rewrite mode)'
	@echo 'make mutation-report  regenerate reports/mutations.{md,json} (both modes, every guard)'
	@echo 'make mutation-corpus  the corpus once per guard switched off, merged into reports/mutations.*'
	@echo 'make fuzz       AFL++ on every fuzz target, FUZZ_SECONDS each (default 60); installs cargo-afl'
	@echo 'make fuzz-replay  every committed fuzz seed and finding, plus a bounded mutation pass (no AFL++)'
	@echo 'make mutants-audit  the outside audit: cargo-mutants over gate, adding to its verdict store (slow; not in verify),'
	@echo '                ARGS='"'"'--shard K/N'"'"' or '"'"'--file gate/src/policy.rs'"'"'; reports/outside-mutants.*'
	@echo 'make db-up      start a throwaway Postgres: export "$$(make -s db-up)"'
	@echo 'make db-down    stop it and remove its folder'
	@echo
	@echo 'Postgres: DATABASE_URL if set, else a throwaway cluster from the machine'"'"'s'
	@echo 'binaries (apt-get install postgresql), or: docker compose up -d (see docker-compose.yml).'

verify: fmt-check clippy test bench-http fuzz-replay mutation-verify

# Coverage-guided fuzzing with AFL++ on stable Rust (fuzz/README.md):
# fuzz/run.sh installs cargo-afl when missing, builds the instrumented
# harnesses in fuzz/afl, and fuzzes each target for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
fuzz:
	bash fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The bounded pass verify runs: every seed and finding through the plain
# targets, and a fixed set of mutants of the seeds (no instrumented build;
# the mutation pass is ignored by plain cargo test, so `test` does not run it twice).
fuzz-replay:
	$(CARGO) test -q -p fuzz --test replay -- --include-ignored

# The whole registry in schemata mode (one build in target/ beside `make test`'s,
# reusing its dependencies; a runtime switch per guard; one mutant per CPU),
# then MUTATION_SAMPLE of its source guards again in rewrite mode, drawn by a
# seed the output prints (replay: make mutation-verify ARGS='--seed S').
MUTATION_SAMPLE ?= 5
mutation-verify:
	$(WITH_DB) $(HARNESS) mutate --cross-check $(MUTATION_SAMPLE) $(ARGS)

fmt-check:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test:
	$(WITH_DB) $(CARGO) test --workspace

# The committed corpus through the real service on a loopback port (each
# actor's key, reqwest), step by step against the database engine; any
# failure or disagreement fails verify. About 2 minutes on 2 cores.
bench-http:
	$(WITH_DB) $(HARNESS) bench --engines database,http --strict --out target/bench-http $(ARGS)

triage:
	$(HARNESS) triage $(ARGS)

# benchmark, attack matrix and the 10,000 generated scenarios (reports/generated.*),
# then the mutation report; first docs/scenario-format.md from the loader's tables.
reports:
	$(HARNESS) scenario-format
	$(WITH_DB) $(HARNESS) report $(ARGS)
	$(MAKE) mutation-report
	$(MAKE) mutation-corpus

# The corpus through `harness bench`, then `harness perf` built in release
# mode, under its own throwaway Postgres unless DATABASE_URL is set: it writes
# reports/performance.{md,json,svg} (a measurement, so the figures vary from
# run to run) and reports/performance-history.md (from
# docs/performance-history.yaml). Arguments for perf: make bench
# PERF_ARGS='--quick'.
bench:
	$(WITH_DB) $(HARNESS) bench $(ARGS)
	$(CARGO) run --release -q -p harness -- db run -- $(CARGO) run --release -q -p harness -- perf $(PERF_ARGS)

mutation:
	$(WITH_DB) $(HARNESS) mutate --mode rewrite $(ARGS)

# reports/mutations.{md,json}: every guard in both modes, times measured here.
mutation-report:
	$(WITH_DB) $(HARNESS) mutate --cross-check all --report-dir reports $(ARGS)

# What the corpus proves per guard: the committed corpus through the database
# engine once per guard switched off (one schemata build of the harness;
# schema guards dropped from every database the benchmark makes), and with a
# partner where one alone lets no attack through (its registry twins, then the
# guards of its threat); merged into the
# reports/mutations.* that mutation-report wrote. Not in verify: a quarter of
# the registry (52 guards, 262 benchmark runs) took 18 min 23 s on 2 busy
# cores, so the whole registry is about 70 minutes (208 single runs at about
# 16 s, then short one-threat pair runs).
mutation-corpus:
	$(WITH_DB) $(HARNESS) mutate --corpus --report-dir reports $(ARGS)

# The outside mutation audit: a pinned cargo-mutants over the gate crate, the
# lib's unit tests first and the whole suite against Postgres for what they
# miss. How many mutants there are and what one costs on this machine are in
# reports/outside-mutants.md: too slow for verify, so it runs by hand in pieces
# (ARGS='--file F', '--shard K/N', '--rerun-missed') or on the CI matrix
# (.github/workflows/mutants-audit.yml); every run adds its verdicts to
# mutations/outside-audit-verdicts.json, and the report is rendered from it.
mutants-audit:
	$(WITH_DB) $(HARNESS) mutants-audit $(ARGS)

db-up:
	@$(HARNESS) db up

db-down:
	@$(HARNESS) db down
