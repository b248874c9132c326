package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"asterion/telemetry"
)

// runWorker runs `asterion run-worker [--once] [--batch-size=N] [--priority-ceiling=N]`: a
// worker process only, without HTTP. Several may run against one database.
func (c *cli) runWorker(ctx context.Context, args []string) error {
	fs := newFlags("run-worker")
	cm := c.bindCommon(fs)
	once := fs.Bool("once", false, "work what is available, up to --batch-size jobs, then exit")
	batch := fs.Int("batch-size", 0, "jobs run at once (and the total with --once); default $ASTERION_WORKERS or 10")
	ceiling := fs.Int("priority-ceiling", -1, "only run jobs with priority <= N (0..100)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("run-worker: unexpected argument %q", fs.Arg(0))
	}
	if *batch < 0 || *batch > 1000 {
		return usagef("run-worker: --batch-size must be 1..1000")
	}
	if *ceiling < -1 || *ceiling > 100 {
		return usagef("run-worker: --priority-ceiling must be 0..100")
	}
	st, err := c.jobsSettings()
	traces := telemetry.ConfigFromEnv(c.getenv)
	if err := errors.Join(err, traces.Validate()); err != nil {
		return err
	}
	if *batch == 0 {
		*batch = st.workers
	}
	cn, err := c.connect(ctx, cm, false, int32(*batch+10))
	if err != nil {
		return err
	}
	defer cn.close()
	tracer, stopTracing, err := startTracing(ctx, traces, cn.log)
	if err != nil {
		return err
	}
	defer stopTracing()
	st.tracer = tracer
	if _, err := cn.migrateUp(ctx); err != nil {
		return err
	}
	out, _, err := newOutput(cn, false)
	if err != nil {
		return err
	}
	svc, _, err := c.newJobsService(cn, st, out)
	if err != nil {
		return err
	}
	rt, err := newRuntime(svc, cn, st, *batch, *ceiling, *batch)
	if err != nil {
		return err
	}
	if *once {
		n, err := rt.RunOnce(ctx)
		if err != nil {
			return err
		}
		if cm.json {
			return json.NewEncoder(c.stdout).Encode(map[string]int{"processed": n})
		}
		fmt.Fprintf(c.stdout, "processed %d job(s)\n", n)
		return nil
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	cn.log.Info("worker started", "worker_id", rt.ID(), "workers", *batch, "priority_ceiling", *ceiling)
	<-ctx.Done()
	cn.log.Info("worker stopping: no new claims; running calls get the shutdown grace", "worker_id", rt.ID(), "grace", st.shutdownGrace)
	if err := rt.Stop(context.WithoutCancel(ctx), st.shutdownGrace); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	cn.log.Info("worker stopped", "worker_id", rt.ID())
	return nil
}
