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

.DEFAULT_GOAL := help
.PHONY: help verify fmt-check clippy test triage reports bench mutation db-up db-down

help:
	@echo 'make verify     formatting, clippy (-D warnings), then every test against Postgres'
	@echo 'make test       every test against Postgres (cargo test --workspace)'
	@echo 'make triage     the guided tour: an unguarded purchase tool, then the gate'
	@echo 'make reports    regenerate reports/ (attack matrix, benchmark, mutations)'
	@echo 'make bench      run the scenario corpus against the gate'
	@echo 'make mutation   delete each registered guard in turn; a named test must fail'
	@echo 'make db-up      start a throwaway Postgres: export "$$(make -s db-up)"'
	@echo 'make db-down    stop it and remove its folder'
	@echo
	@echo 'Postgres: DATABASE_URL if set, else a throwaway cluster from the machine'"'"'s'
	@echo 'binaries (apt-get install postgresql), or: docker compose up -d (see docker-compose.yml).'

verify: fmt-check clippy test

fmt-check:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test:
	$(WITH_DB) $(CARGO) test --workspace

triage:
	$(HARNESS) triage $(ARGS)

reports:
	$(WITH_DB) $(HARNESS) report $(ARGS)

bench:
	$(WITH_DB) $(HARNESS) bench $(ARGS)

mutation:
	$(WITH_DB) $(HARNESS) mutate $(ARGS)

db-up:
	@$(HARNESS) db up

db-down:
	@$(HARNESS) db down
