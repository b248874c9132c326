package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"asterion/jobs"
)

// newRiverUI builds River's own web UI over the worker client (or, with --no-worker, an
// insert-only client on the same pool) for admins at /admin/river.
func newRiverUI(ctx context.Context, cn *conn, rt *jobs.Runtime) (http.Handler, error) {
	var client *river.Client[pgx.Tx]
	if rt != nil {
		client = rt.Client()
	} else {
		var err error
		if client, err = river.NewClient(riverpgxv5.New(cn.pool), &river.Config{Logger: cn.log.With("component", "riverui")}); err != nil {
			return nil, fmt.Errorf("river client for the UI: %w", err)
		}
	}
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil), Logger: cn.log.With("component", "riverui"),
		Prefix: "/admin/river", JobListHideArgsByDefault: true,
	})
	if err != nil {
		return nil, fmt.Errorf("river ui: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("start river ui: %w", err)
	}
	return h, nil
}
