# Asterion: the two commands a person needs are `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
ASTERION_ADDR ?= 127.0.0.1:8080
export ASTERION_ADDR

BIN := bin/asterion

.PHONY: build run test test-short test-bare-machine bench reliability reliability-long fuzz generate generate-check docs schema fmt vet

build:
	$(GO) build -o $(BIN) ./cmd/asterion

## run: build, migrate and serve on $(ASTERION_ADDR) against $(DATABASE_URL) (the database is created
## when missing); without DATABASE_URL, against 127.0.0.1:5432, or a private PostgreSQL in
## .data/postgres when nothing answers there.
run: build
	./$(BIN) serve --local-database

## test: every test, with the race detector, against $(ASTERION_TEST_DATABASE_URL), or the
## PostgreSQL on 127.0.0.1:5432, or (when nothing answers there) the tests' own private cluster,
## started once and kept running for the next run (one line says where). The per-package limit
## leaves room for the handlers package, whose browser tests make it by far the longest on a
## busy two-core machine.
test: build
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@url="$$($(GO) run ./db/dbtest/testserver)" && \
	echo "$(GO) test -race -count=1 -timeout 15m ./..." && \
	ASTERION_TEST_DATABASE_URL="$$url" $(GO) test -race -count=1 -timeout 15m ./...

test-short:
	@url="$$($(GO) run ./db/dbtest/testserver)" && \
	ASTERION_TEST_DATABASE_URL="$$url" $(GO) test -race -count=1 -short ./...

## test-bare-machine: as root, `make run` and the tests' own cluster on a machine where no
## PostgreSQL answers (each in a network namespace of its own, from a clone in a private
## directory, as root and as the user nobody). Slow: a few minutes.
test-bare-machine:
	$(GO) test -tags baremachine -race -count=1 -timeout 20m -v -run '^TestBareMachine' ./cmd/asterion/

## docs: regenerate docs/configuration.md from the table of environment variables in config/vars.go
## (a test fails when the committed document differs from it).
docs:
	$(GO) generate ./config

## schema: regenerate db/schema.sql (pg_dump --schema-only of a freshly migrated database, with
## the lines that vary between runs removed); a test fails when the committed file differs.
schema:
	@url="$$($(GO) run ./db/dbtest/testserver)" && \
	ASTERION_TEST_DATABASE_URL="$$url" $(GO) test -count=1 -run '^TestSchemaFile$$' ./db -update

fmt:
	gofmt -w $$(git ls-files '*.go')
	$(GO) tool templ fmt views

vet:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

## generate: rebuild the committed front-end output: vendored htmx and htmx-ext-sse, the templ
## code and the Tailwind CSS (runs `npm ci` first when node_modules is missing).
generate:
	@test -d node_modules || npm ci --no-audit --no-fund
	mkdir -p static/css static/js
	cp node_modules/htmx.org/dist/htmx.min.js static/js/htmx.min.js
	cp node_modules/htmx-ext-sse/dist/sse.js static/js/sse.js
	$(GO) tool templ fmt views
	$(GO) tool templ generate
	BROWSERSLIST_IGNORE_OLD_DATA=1 node_modules/.bin/tailwindcss -c tailwind.config.js -i views/input.css -o static/css/app.css --minify

## generate-check: fails when regenerating templ code changes a committed file.
generate-check:
	$(GO) tool templ generate
	$(GO) tool templ fmt -fail views
	git diff --exit-code -- '*_templ.go'

## bench: the benchmark suite against a bare-River baseline; writes BENCHMARKS.md and bench.json.
## It runs against a private PostgreSQL it starts itself (pg_stat_statements loaded, autovacuum
## on, the same settings on every machine) unless ASTERION_BENCH_DATABASE_URL names another.
bench: build
	$(GO) build -o bin/asterion-bench ./cmd/asterion-bench
	./bin/asterion-bench -bin bin/asterion -out BENCHMARKS.md

## reliability: the fault-injection suite at its short size (CI runs it after make test; run it
## alone, not beside make test or make bench): SIGKILLed workers, a restarted private PostgreSQL,
## a misbehaving provider, an offer above the drain rate.
reliability:
	ASTERION_RELIABILITY=short $(GO) test -race -count=1 -timeout 15m -v ./reliability/

## reliability-long: the same suite at full size (2,000 prompts, 60 s of overload), on demand.
reliability-long:
	ASTERION_RELIABILITY=long $(GO) test -count=1 -timeout 60m -v ./reliability/

FUZZTIME ?= 20s
## fuzz: every fuzz target for FUZZTIME each (the seed corpora run in make test too).
fuzz:
	$(GO) test ./handlers/ -run '^$$' -fuzz '^FuzzDecodeSubmit$$' -fuzztime $(FUZZTIME)
	$(GO) test ./handlers/ -run '^$$' -fuzz '^FuzzParseLastEventID$$' -fuzztime $(FUZZTIME)
	$(GO) test ./handlers/ -run '^$$' -fuzz '^FuzzParseLoginForm$$' -fuzztime $(FUZZTIME)
	$(GO) test ./handlers/ -run '^$$' -fuzz '^FuzzWriteSSEData$$' -fuzztime $(FUZZTIME)
	$(GO) test ./handlers/ -run '^$$' -fuzz '^FuzzBulkForm$$' -fuzztime $(FUZZTIME)
	$(GO) test ./handlers/ -run '^$$' -fuzz '^FuzzParsePreferWait$$' -fuzztime $(FUZZTIME)
	$(GO) test ./jobs/provider/ -run '^$$' -fuzz '^FuzzParseDirectives$$' -fuzztime $(FUZZTIME)
	$(GO) test ./jobs/deferred/ -run '^$$' -fuzz '^FuzzValidateStatus$$' -fuzztime $(FUZZTIME)
	$(GO) test ./jobs/deferred/ -run '^$$' -fuzz '^FuzzValidateHandle$$' -fuzztime $(FUZZTIME)
	$(GO) test ./jobs/deferred/ -run '^$$' -fuzz '^FuzzCanonicalJSON$$' -fuzztime $(FUZZTIME)
	$(GO) test ./jobs/deferred/ -run '^$$' -fuzz '^FuzzEntryDigest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./jobs/ -run '^$$' -fuzz '^FuzzDecodeCursor$$' -fuzztime $(FUZZTIME)
	$(GO) test ./jobs/delivery/ -run '^$$' -fuzz '^FuzzParseSignatureHeader$$' -fuzztime $(FUZZTIME)
