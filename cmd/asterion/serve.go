package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"asterion/db"
	"asterion/handlers"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/flowctl"
	"asterion/jobs/governor"
	"asterion/telemetry"
)

// serve migrates, bootstraps the first admin, then serves HTTP until ctx ends.
func (c *cli) serve(ctx context.Context, args []string) error {
	fs := newFlags("serve")
	cm := c.bindCommon(fs)
	addr := fs.String("addr", envOr(c.getenv, "ASTERION_ADDR", "127.0.0.1:8080"), "listen address host:port")
	workers := fs.Int("workers", 0, "prompt jobs run at once by the embedded pool (default $ASTERION_WORKERS or 10)")
	noWorker := fs.Bool("no-worker", false, "serve HTTP only; run workers with asterion run-worker")
	localDB := fs.Bool("local-database", false, "without a database URL, use 127.0.0.1:5432 or start a private PostgreSQL (in .data/postgres; as root, under /var/lib/asterion)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *localDB && cm.databaseURL == "" {
		// A taken port fails before a private cluster is started for nothing.
		if err := portFree(*addr); err != nil {
			return err
		}
		url, stop, err := c.localDatabase(ctx)
		if err != nil {
			return err
		}
		defer stop()
		cm.databaseURL = url
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	if *workers < 0 || *workers > maxWorkers {
		return usagef("serve: --workers must be 1..%d", maxWorkers)
	}
	_, _, verr := cm.validate(c.getenv)
	st, serr := c.jobsSettings()
	idCfg, ierr := c.identityConfig()
	streams, sterr := c.streamConfig()
	limits, lerr := httpLimits(c.getenv)
	traces := telemetry.ConfigFromEnv(c.getenv)
	if err := errors.Join(verr, serr, ierr, sterr, lerr, traces.Validate(), validateAddr(*addr), validatePprofAddr(c.getenv("ASTERION_PPROF_ADDR"))); err != nil {
		return err
	}
	if *workers == 0 {
		*workers = st.workers
	}
	// Take the port before touching the database, so a port in use fails at once.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return addrInUse(*addr)
		}
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	defer ln.Close()

	cn, err := c.connect(ctx, cm, true, 22)
	if err != nil {
		return err
	}
	defer cn.close()
	log := cn.log
	tracer, stopTracing, err := startTracing(ctx, traces, log)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: after the server and the workers have ended their spans.
	defer stopTracing()
	st.tracer = tracer
	applied, err := cn.migrateUp(ctx)
	if err != nil {
		return err
	}
	for _, a := range applied {
		log.Info("migration applied", "migration", a)
	}
	ids, err := identity.New(cn.bun, idCfg)
	if err != nil {
		return err
	}
	generated, created, err := ids.Bootstrap(ctx, c.getenv("ASTERION_ADMIN_PASSWORD"))
	if err != nil {
		return fmt.Errorf("bootstrap first admin: %w", err)
	}
	if created && generated != "" {
		// The password goes to stderr once, outside the JSON log, so log shipping never keeps it.
		log.Warn("created org default and user admin with a generated password; it is printed once on stderr, outside the log")
		fmt.Fprintf(c.stderr, "asterion: generated password of user admin (shown only this once): %s\n", generated)
	} else if created {
		log.Info("created org default and user admin with the password from ASTERION_ADMIN_PASSWORD")
	}

	maintCtx, stopMaint := context.WithCancel(ctx)
	maintDone := make(chan struct{})
	go func() { defer close(maintDone); ids.RunMaintenance(maintCtx, log) }()
	defer func() { stopMaint(); <-maintDone }()

	out, outHub, err := newOutput(cn, true)
	if err != nil {
		return err
	}
	defer outHub.Start(context.WithoutCancel(ctx))()
	svc, owners, err := c.newJobsService(cn, st, out)
	if err != nil {
		return err
	}
	hub := feed.NewHub(cn.pool, cn.bun, log)
	svc.NotifyCommits(hub.Poke)
	defer hub.Start(context.WithoutCancel(ctx))()
	var runtime *jobs.Runtime
	if !*noWorker {
		runtime, err = newRuntime(svc, cn, st, *workers, -1, 0)
		if err != nil {
			return err
		}
		if err := runtime.Start(ctx); err != nil {
			return err
		}
		log.Info("worker pool started", "workers", *workers, "worker_id", runtime.ID())
	}
	riverUI, err := newRiverUI(ctx, cn, runtime)
	if err != nil {
		return err
	}
	migrator, err := db.NewMigrator(cn.bun, cn.pool)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerPollerMetrics(reg, svc.Stats())
	if m := svc.Meter(); m != nil {
		reg.MustRegister(newUsageCollector(m))
	}
	// The governor keeps its state in the database; this one only tells the health page which
	// limits are configured.
	gov, err := governor.New(st.governorConfig(cn))
	if err != nil {
		return err
	}
	flow, err := flowctl.New(flowctl.Config{DB: cn.bun, Governor: gov})
	if err != nil {
		return err
	}
	srv := handlers.New(handlers.Deps{
		Identity: ids,
		Jobs:     svc,
		Chains:   owners.Chains,
		Batches:  owners.Batches,
		Flow:     flow,
		Hub:      hub,
		Output:   outHub,
		RiverUI:  riverUI,
		Logger:   log,
		Registry: reg,
		Version:  version,
		Streams:  streams,
		Limits:   limits,
		Tracer:   tracer,
		// Behind a TLS-terminating proxy the browser talks HTTPS: mark cookies Secure.
		SecureCookies: c.getenv("ASTERION_SECURE_COOKIES") == "true",
		Ready: func(ctx context.Context) error {
			st, err := migrator.Status(ctx)
			if err != nil {
				return err
			}
			if !st.Current() {
				return errors.New("migrations pending")
			}
			return nil
		},
	})
	if err := startPprof(ctx, c.getenv("ASTERION_PPROF_ADDR"), log); err != nil {
		return fmt.Errorf("profiler on ASTERION_PPROF_ADDR: %w", err)
	}
	log.Info("serving", "addr", ln.Addr().String(), "database", cn.url.Redacted())
	// A signal stops the worker pool's claims at once, while HTTP shuts down beside it; the
	// process ends once both have (the pool after its shutdown grace at most).
	stopped := make(chan struct{})
	if runtime != nil {
		go func() {
			defer close(stopped)
			<-ctx.Done()
			log.Info("stopping: no new claims; running calls get the shutdown grace", "grace", st.shutdownGrace)
			if err := runtime.Stop(context.WithoutCancel(ctx), st.shutdownGrace); err != nil {
				log.Warn("stop workers", "err", err)
			}
		}()
	} else {
		close(stopped)
	}
	serveErr := srv.Serve(ctx, ln)
	if serveErr != nil && ctx.Err() == nil && runtime != nil {
		// HTTP failed on its own: the pool still stops, with its grace.
		if err := runtime.Stop(context.WithoutCancel(ctx), st.shutdownGrace); err != nil {
			log.Warn("stop workers", "err", err)
		}
	} else {
		<-stopped
	}
	log.Info("stopped")
	return serveErr
}

// registerPollerMetrics exposes the deferred-operation poller's counters. They count this
// process's polls; the poller runs on the River leader, so sum over processes.
func registerPollerMetrics(reg prometheus.Registerer, st *jobs.PollerStats) {
	for name, v := range map[string]*atomic.Int64{
		"polls": &st.Polls, "transitions": &st.Transitions, "expiries": &st.Expiries, "errors": &st.Errors,
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "asterion_deferred_poller_" + name + "_total",
			Help: "Deferred-operation poller " + name + " in this process.",
		}, func() float64 { return float64(v.Load()) }))
	}
}
