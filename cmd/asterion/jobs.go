package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"asterion/handlers"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/delivery"
	"asterion/jobs/governor"
	"asterion/jobs/intake"
	"asterion/jobs/output"
	"asterion/jobs/provider"
	jobusage "asterion/jobs/usage"
)

// maxWorkers is the most prompt jobs one process may run at once: LLM calls mostly wait, so
// a process holds thousands.
const maxWorkers = 5000

// jobsSettings are the execution knobs read from the environment; the defaults are in
// docs/configuration.md (30 s heartbeat, 5 min stale, 15 min stuck).
type jobsSettings struct {
	heartbeat, staleAfter, stuckAfter, reclaimEvery, jobTimeout, maxTTL time.Duration
	// intakeYield may be zero: workers then never wait for submits.
	intakeYield time.Duration
	// shutdownGrace is how long a stopping worker pool lets running calls finish before it
	// hands them back (ASTERION_SHUTDOWN_GRACE; zero cuts them at once).
	shutdownGrace time.Duration
	workers       int
	// prices is the price table of ASTERION_PRICES.
	prices jobusage.Prices
	// rpm and tpm are ASTERION_PROVIDER_RPM and ASTERION_PROVIDER_TPM (0: learned).
	rpm, tpm int
	// maxPause is ASTERION_PROVIDER_MAX_PAUSE: the longest one provider answer holds a model.
	maxPause time.Duration
	// models, maxQueued and submitRate are ASTERION_MODELS, ASTERION_ORG_MAX_QUEUED and
	// ASTERION_SUBMIT_RATE.
	models     []string
	maxQueued  int
	maxRunning int
	submitRate float64
	// tracer traces the service's submits, jobs and provider calls (nil: tracing off); the
	// command sets it from OTEL_EXPORTER_OTLP_ENDPOINT.
	tracer trace.TracerProvider
}

func (c *cli) jobsSettings() (jobsSettings, error) {
	var errs []error
	dur := func(key string, def time.Duration) time.Duration {
		v := c.getenv(key)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s: want a positive duration like 30s, got %q", key, v))
			return def
		}
		return d
	}
	st := jobsSettings{
		heartbeat:    dur("ASTERION_HEARTBEAT_INTERVAL", 30*time.Second),
		staleAfter:   dur("ASTERION_STALE_AFTER", 5*time.Minute),
		stuckAfter:   dur("ASTERION_STUCK_AFTER", 15*time.Minute),
		reclaimEvery: dur("ASTERION_RECLAIM_EVERY", time.Minute),
		jobTimeout:   dur("ASTERION_JOB_TIMEOUT", provider.DefaultOpenAITimeout+30*time.Second),
		maxTTL:       dur("ASTERION_OPERATION_MAX_TTL", deferred.DefaultMaxTTL),
		workers:      10,
		intakeYield:  intake.DefaultYield,
	}
	if st.shutdownGrace, errs = shutdownGrace(c.getenv, errs); st.shutdownGrace < 0 {
		st.shutdownGrace = defaultShutdownGrace
	}
	if v := c.getenv("ASTERION_INTAKE_YIELD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			errs = append(errs, fmt.Errorf("ASTERION_INTAKE_YIELD: want a duration from 0 to 1m like 100ms, got %q", v))
		} else {
			st.intakeYield = d
		}
	}
	st.maxPause = governor.DefaultMaxPause
	if v := c.getenv("ASTERION_PROVIDER_MAX_PAUSE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > governor.MaxMaxPause {
			errs = append(errs, fmt.Errorf("ASTERION_PROVIDER_MAX_PAUSE: want a positive duration up to %s like 5m, got %q",
				governor.MaxMaxPause, v))
		} else {
			st.maxPause = d
		}
	}
	if v := c.getenv("ASTERION_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxWorkers {
			errs = append(errs, fmt.Errorf("ASTERION_WORKERS: want 1..%d, got %q", maxWorkers, v))
		} else {
			st.workers = n
		}
	}
	if v := strings.TrimSpace(c.getenv("ASTERION_MODELS")); v != "" {
		for _, m := range strings.Split(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				st.models = append(st.models, m)
			}
		}
		if len(st.models) == 0 {
			errs = append(errs, fmt.Errorf("ASTERION_MODELS: want model names separated by commas, got %q", v))
		}
	}
	if v := c.getenv("ASTERION_SUBMIT_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			errs = append(errs, fmt.Errorf("ASTERION_SUBMIT_RATE: want submits per second, at least 0 (0: none), got %q", v))
		} else {
			st.submitRate = r
		}
	}
	for key, dst := range map[string]*int{"ASTERION_PROVIDER_RPM": &st.rpm, "ASTERION_PROVIDER_TPM": &st.tpm,
		"ASTERION_ORG_MAX_QUEUED": &st.maxQueued, "ASTERION_ORG_MAX_RUNNING": &st.maxRunning} {
		if v := c.getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s: want a whole number of at least 0 (0: no limit of its own), got %q", key, v))
				continue
			}
			*dst = n
		}
	}
	prices, err := jobusage.LoadPrices(c.getenv(jobusage.PricesEnv))
	if err != nil {
		errs = append(errs, err)
	}
	st.prices = prices
	return st, errors.Join(errs...)
}

// governorConfig is the provider governor's configuration of these settings on cn.
func (st jobsSettings) governorConfig(cn *conn) governor.Config {
	return governor.Config{DB: cn.bun, RPM: st.rpm, TPM: st.tpm, MaxPause: st.maxPause}
}

// newJobsService builds the execution core with the configured provider, and the operation
// owners over it (serve passes them to the front door).
func (c *cli) newJobsService(cn *conn, st jobsSettings, out *output.Writer) (*jobs.Service, handlers.Owners, error) {
	prov, err := provider.FromEnv(c.getenv)
	if err != nil {
		return nil, handlers.Owners{}, err
	}
	policy := deferred.DefaultPolicy()
	policy.MaxTTL = st.maxTTL
	policy.DefaultTTL = st.maxTTL
	meter, err := jobusage.New(jobusage.Config{DB: cn.bun, Prices: st.prices})
	if err != nil {
		return nil, handlers.Owners{}, err
	}
	gov, err := governor.New(st.governorConfig(cn))
	if err != nil {
		return nil, handlers.Owners{}, err
	}
	svc, err := jobs.NewService(jobs.Config{DB: cn.bun, Provider: prov, Logger: cn.log, Policy: policy,
		HeartbeatInterval: st.heartbeat, StaleAfter: st.staleAfter, StuckAfter: st.stuckAfter,
		Intake: intake.Config{Yield: st.intakeYield}, Output: out, Usage: meter, Governor: gov,
		Models: st.models, OrgMaxQueued: st.maxQueued, OrgMaxRunning: st.maxRunning, SubmitRate: st.submitRate,
		Tracer: st.tracer})
	if err != nil {
		return nil, handlers.Owners{}, err
	}
	// Every process that settles operations resumes chains, accepts the deliveries of
	// completed prompts, and answers for both kinds to the poller; worker pools built from svc
	// send the deliveries. The batches of the front door: their owner answers the poller, and
	// their worker runs on the worker pools built from svc.
	owners, err := handlers.NewOwners(svc)
	if err != nil {
		return nil, handlers.Owners{}, err
	}
	keys, err := c.secretKeys()
	if err != nil {
		return nil, handlers.Owners{}, err
	}
	allowPrivate, err := c.webhookAllowPrivate()
	if err != nil {
		return nil, handlers.Owners{}, err
	}
	if _, err := delivery.New(delivery.Config{Jobs: svc, SecretKey: keys, AllowPrivate: allowPrivate}); err != nil {
		return nil, handlers.Owners{}, err
	}
	return svc, owners, nil
}

// newRuntime builds a worker pool.
func newRuntime(svc *jobs.Service, cn *conn, st jobsSettings, workers, ceiling, batch int) (*jobs.Runtime, error) {
	return jobs.NewRuntime(svc, jobs.RuntimeConfig{Pool: cn.pool, Workers: workers, PriorityCeiling: ceiling,
		BatchSize: batch, ReclaimEvery: st.reclaimEvery, JobTimeout: st.jobTimeout})
}
