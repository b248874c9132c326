// Package config is the one table of the environment variables Asterion reads. The code that
// reads each variable stays beside the setting it feeds; this table is what a person reads:
// `asterion help env` prints it and docs/configuration.md is generated from it, and its tests
// fail when a variable read anywhere in the code is missing here or the document is stale.
package config

// Var is one environment variable: its name, its default in words, and what it sets.
type Var struct {
	Name    string
	Default string
	Meaning string
}

// Group is a titled part of the table.
type Group struct {
	Title string
	// Intro, when set, is a paragraph printed before the group's variables.
	Intro string
	Vars  []Var
}

// Groups is every environment variable, grouped as the documentation shows them.
var Groups = []Group{
	{
		Title: "Database",
		Intro: "PostgreSQL should run with autovacuum on (its default): every job leaves several row versions " +
			"in the job, registry, event and River tables, and without vacuuming them lookups slow down over time.",
		Vars: []Var{
			{"DATABASE_URL", "none: `serve --local-database` (what `make run` runs) then uses `postgres://postgres@127.0.0.1:5432/asterion?sslmode=disable`, or a private cluster when nothing answers there; every other command requires it",
				"the PostgreSQL database; must be `postgres://` or `postgresql://` with a user, host and database name; `--database-url` overrides it"},
			{"ASTERION_DB_WAIT", "`30s`", "how long to keep retrying an unreachable database at start before giving up"},
			{"ASTERION_STATEMENT_TIMEOUT", "`15s`", "`statement_timeout` of the app's database connections (`asterion migrate` runs without one; River's pgx pool has 2 min)"},
			{"ASTERION_DEFAULT_DB_ADDR", "`127.0.0.1:5432`", "for `serve --local-database` without `DATABASE_URL`: the PostgreSQL server tried first"},
			{"ASTERION_LOCAL_DB_DIR", "`.data/postgres`; as root `/var/lib/asterion/<clone>-<hash>/postgres`, owned by the `postgres` user", "for `serve --local-database` when nothing answers at `ASTERION_DEFAULT_DB_ADDR`: where the private cluster lives"},
			{"ASTERION_PG_BIN", "the newest `/usr/lib/postgresql/*/bin`", "where the PostgreSQL programs are, for the private clusters of `make run` and of the tests"},
		},
	},
	{
		Title: "Server",
		Vars: []Var{
			{"ASTERION_ADDR", "`127.0.0.1:8080`", "listen address of `serve`; `--addr` overrides it"},
			{"ASTERION_ADMIN_PASSWORD", "generated and printed once on stderr", "password of the first `admin`, used only when the database has no user yet"},
			{"ASTERION_LOG_LEVEL", "`info`", "`debug`, `info`, `warn` or `error`; logs are JSON on stderr"},
			{"ASTERION_SHUTDOWN_GRACE", "`30s`", "how long `serve` and `run-worker`, on SIGTERM or SIGINT, let the calls they run finish; they claim nothing new from the signal on, and a call still running after the grace is cut and its job handed back `queued`, its cut run listed in `attempts` with `error_kind: \"shutdown\"` and not counted against `max_attempts`; `0s` cuts at once, at most `1h`"},
			{"ASTERION_PPROF_ADDR", "off", "serve Go's profiler (`/debug/pprof/`, without `cmdline`) on this address, apart from the app; a non-loopback address is refused"},
			{"ASTERION_SECURE_COOKIES", "unset", "`true` marks the session cookie `Secure` (serve behind TLS)"},
		},
	},
	{
		Title: "Provider",
		Vars: []Var{
			{"ASTERION_PROVIDER", "`sim`", "`sim` (built in, no network) or `openai` (any OpenAI-compatible chat completions API)"},
			{"ASTERION_OPENAI_BASE_URL", "none", "the OpenAI-compatible API's base URL, when `ASTERION_PROVIDER=openai`"},
			{"ASTERION_OPENAI_API_KEY", "none", "the key sent to that API; never written to a log or an error"},
			{"ASTERION_OPENAI_MODEL", "none", "the model asked for when a prompt names none"},
			{"ASTERION_OPENAI_TIMEOUT", "`180s`", "the longest one OpenAI-compatible call may take; a call cut by it fails as `timeout`"},
			{"ASTERION_MODELS", "the provider's own model only (`ASTERION_OPENAI_MODEL`, or the sim's `sim-1`)", "the models a prompt may ask for in `options.model` by any door, separated by commas; the first is the default, another answers 422"},
			{"ASTERION_PRICES", "unset (every model free)", "a JSON file `{\"<model>\": {\"input_per_mtok\": n, \"output_per_mtok\": n}}` pricing every attempt's tokens"},
			{"ASTERION_PROVIDER_RPM", "unset (as the provider reports)", "calls started per minute for each model, across every process on the database; without it the limits the provider reports in `x-ratelimit-*` are used, and every 429 pauses the model for every process until its Retry-After"},
			{"ASTERION_PROVIDER_TPM", "unset (as the provider reports)", "tokens started per minute for each model, across every process, as `ASTERION_PROVIDER_RPM` for calls"},
			{"ASTERION_PROVIDER_MAX_PAUSE", "`5m`", "the longest one provider answer holds a model for every process (a 429's Retry-After, an exhausted `x-ratelimit-reset-*`, one call's token debt) and the longest the limited job's own retry waits for it; more than 0 and at most `24h`"},
			{"ASTERION_SIM_LATENCY", "`200ms-1.5s` (random)", "latency range of the sim provider, `min-max`, for example `0-0` for benchmarks"},
			{"ASTERION_SIM_RPM", "unset (no limit)", "makes each process's sim answer at most this many calls in any sliding 60 s window, refusing the rest with `rate_limit` and a Retry-After, and report the window's figures as OpenAI's `x-ratelimit-*` headers do"},
		},
	},
	{
		Title: "Admission, fairness and limits",
		Vars: []Var{
			{"ASTERION_ORG_MAX_RUNNING", "unset (none)", "the jobs of one org running at once, across every process; a job beyond waits `queued` with `waiting_for: \"org_share\"` while another org's job takes the slot"},
			{"ASTERION_ORG_MAX_QUEUED", "unset (none)", "an org's queued plus running jobs; a submit beyond answers 429 `/quota-exceeded` with `Retry-After`"},
			{"ASTERION_SUBMIT_RATE", "unset (none)", "submits per second per user, with a burst of ten times that, counted by each server process; beyond it 429 `/submit-rate` with `Retry-After`"},
			{"ASTERION_MAX_STREAMS_PER_USER", "`16`", "SSE streams (and `Prefer: wait` requests) one user may hold open in one server process; the next answers 429"},
			{"ASTERION_MAX_CONNS_PER_IP", "`256`", "open connections one client address may hold; the next is answered 429 and closed (it counts TCP peers whatever `ASTERION_TRUSTED_PROXIES` says, so behind a reverse proxy set it above the proxy's connection pool)"},
			{"ASTERION_TRUSTED_PROXIES", "unset (none)", "comma-separated CIDRs (a bare address is that one) of the reverse proxies whose `X-Forwarded-For` gives the client's address for the sign-in limits and the log: the client is the rightmost entry that is not itself a trusted proxy; from any other peer the header is ignored; a bad entry stops the server at start"},
			{"ASTERION_LOGIN_WINDOW", "`15m`", "how far back failed sign-ins count: more than 5 for one user name from one address, 20 from one address, or 100 for one user name from all addresses inside it answer 429 with `Retry-After`"},
		},
	},
	{
		Title: "Execution",
		Vars: []Var{
			{"ASTERION_WORKERS", "`10`", "prompt jobs one process runs at once (1..5000); `--workers` and `--batch-size` override it"},
			{"ASTERION_HEARTBEAT_INTERVAL", "`30s`", "how often a process records that its running jobs are alive (one statement for all of them)"},
			{"ASTERION_STALE_AFTER", "`5m`", "a running job whose heartbeat is older than this is reclaimed: handed back `queued` on a new vehicle while it has attempts left"},
			{"ASTERION_STUCK_AFTER", "`15m`", "a stale job started longer ago than this is failed as stuck by the reclaim pass instead of being queued again"},
			{"ASTERION_RECLAIM_EVERY", "`1m`", "how often the reclaim pass looks for stale jobs and orphaned vehicles"},
			{"ASTERION_JOB_TIMEOUT", "the OpenAI timeout plus `30s`", "the longest one execution of a job may take"},
			{"ASTERION_OPERATION_MAX_TTL", "`15m`", "the longest expiry a deferred operation may ask for; longer requests are clamped to it"},
			{"ASTERION_INTAKE_YIELD", "`100ms`", "puts a `serve` process's submits before its workers: a worker holds back a job start for at most this long while submits of its process are in flight, and while submits flow the workers' claim and finish transactions go through a lane half as wide as the cores; `0` turns it off (at most `1m`)"},
		},
	},
	{
		Title: "Secrets and webhooks",
		Vars: []Var{
			{"ASTERION_SECRET_KEY", "a key generated on first use into `.data/secret.key` (mode 0600) under the working directory, shared by the server and the CLI started there", "the server's secret key, base64 of 32 bytes (`openssl rand -base64 32`); webhook secrets are stored sealed with it (AES-256-GCM), so changing it, or losing the file, means setting the webhooks again"},
			{"ASTERION_WEBHOOK_ALLOW_PRIVATE", "`false`", "`true` lets webhooks go to loopback, private and link-local addresses; otherwise `set-webhook` refuses them and each delivery refuses to connect to one"},
		},
	},
	{
		Title: "Tracing",
		Intro: "Tracing is off unless an endpoint is set. `OTEL_EXPORTER_OTLP_HEADERS` and the other `OTEL_EXPORTER_OTLP_*` " +
			"and `OTEL_BSP_*` settings work as the OpenTelemetry SDK reads them.",
		Vars: []Var{
			{"OTEL_EXPORTER_OTLP_ENDPOINT", "unset (no exporter, no spans)", "an OTLP/HTTP collector base URL such as `http://127.0.0.1:4318`: `serve` and `run-worker` then export one trace per prompt to its `/v1/traces` (the HTTP request, the submit transaction, the River job and the provider call); an incoming W3C `traceparent` on submit becomes the parent"},
			{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "unset", "the full traces URL; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`"},
			{"OTEL_EXPORTER_OTLP_PROTOCOL", "`http/protobuf`", "only `http/protobuf` is supported; another value stops the server at start"},
			{"OTEL_SERVICE_NAME", "`asterion`", "the service name of the traces"},
		},
	},
	{
		Title: "Development",
		Vars: []Var{
			{"ASTERION_TEST_DATABASE_URL", "`postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable`, or, when nothing answers there, the tests' own private cluster (kept running between runs)", "tests only: the server on which each test creates (and drops) its own database"},
			{"ASTERION_RELIABILITY", "unset (the suite is skipped)", "`short` or `long`: runs the fault-injection suite in `reliability/` at that size (`make reliability`, `make reliability-long`)"},
			{"ASTERION_BENCH_DATABASE_URL", "`postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable`", "`make bench`: the maintenance database on which the bench creates its own databases"},
		},
	},
}

// Lookup returns the variable named name, and whether the table has it.
func Lookup(name string) (Var, bool) {
	for _, g := range Groups {
		for _, v := range g.Vars {
			if v.Name == name {
				return v, true
			}
		}
	}
	return Var{}, false
}
