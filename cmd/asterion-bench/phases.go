package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// asterionOnly runs the phases that have no baseline counterpart: live streams, dashboards, a
// standing backlog, pages as the database grows, and the mission page of a long history. They
// run after the load phases, pages and mission last, since they leave a large database behind.
type asterionOnly struct {
	cfg         config
	api         *apiClient
	pid         int
	dbURL       string
	probe       *probe
	pageSizes   []int
	growthSizes []int
}

func (a asterionOnly) run(ctx context.Context, s *side) error {
	show := func(name string, v any) {
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintf(os.Stderr, "== %s\n%s\n", name, b)
	}
	if a.cfg.wants(a.cfg.phases, "streams") {
		a.probe.drain(ctx)
		r, err := runStreams(ctx, a.api, a.pid, a.cfg.streams, a.cfg.streamsBig, 30)
		if err != nil {
			return fmt.Errorf("streams phase: %w", err)
		}
		s.Streams = &r
		show("streams", r)
		// Let the server notice the closed streams before the next phase.
		time.Sleep(time.Second)
	}
	if a.cfg.wants(a.cfg.phases, "dashboards") {
		a.probe.drain(ctx)
		r, err := runDashboards(ctx, a.api, a.probe.pool, "admin", benchPassword, a.cfg.dashboards, 20)
		if err != nil {
			return fmt.Errorf("dashboards phase: %w", err)
		}
		s.Dashboards = &r
		show("dashboards", r)
		time.Sleep(time.Second)
	}
	if a.cfg.wants(a.cfg.phases, "growth") {
		r, err := runGrowth(ctx, growthEnv{bin: a.cfg.bin, adminURL: a.cfg.adminURL, dbName: a.cfg.dbPrefix + "_growth",
			sizes: a.growthSizes, submitOf: 3 * time.Second, drainFor: 10 * time.Second})
		if err != nil {
			return fmt.Errorf("growth phase: %w", err)
		}
		s.Growth = &r
		show("growth", r)
	}
	if a.cfg.wants(a.cfg.phases, "pages") {
		a.probe.drain(ctx)
		r, err := runPages(ctx, pagesEnv{api: a.api, bin: a.cfg.bin, dbURL: a.dbURL, user: "admin", password: benchPassword,
			sizes: a.pageSizes, requests: a.cfg.pageRequests})
		if err != nil {
			return fmt.Errorf("pages phase: %w", err)
		}
		s.Pages = &r
		show("pages", r)
	}
	if a.cfg.wants(a.cfg.phases, "mission") {
		a.probe.drain(ctx)
		r, err := runMission(ctx, a.api, a.cfg.bin, a.dbURL, a.pid)
		if err != nil {
			return fmt.Errorf("mission phase: %w", err)
		}
		s.Mission = &r
		show("mission", r)
	}
	return a.runLoadPhases(ctx, s, show)
}

// runLoadPhases runs the phases that start a server of their own with settings of their own
// (phaseserver.go): live output to many streams, thousands of calls in flight, a governed
// provider limit, a small org beside a large one's backlog, the front door beside the core
// API, and a large batch of the front door beside a small org's prompts.
func (a asterionOnly) runLoadPhases(ctx context.Context, s *side, show func(string, any)) error {
	if a.cfg.wants(a.cfg.phases, "chunks") {
		r, err := runChunks(ctx, a.cfg)
		if err != nil {
			return fmt.Errorf("chunks phase: %w", err)
		}
		s.Chunks = &r
		show("chunks", r)
	}
	if a.cfg.wants(a.cfg.phases, "inflight") {
		r, err := runInflight(ctx, a.cfg)
		if err != nil {
			return fmt.Errorf("inflight phase: %w", err)
		}
		s.Inflight = &r
		show("inflight", r)
	}
	if a.cfg.wants(a.cfg.phases, "governed") {
		r, err := runGoverned(ctx, a.cfg)
		if err != nil {
			return fmt.Errorf("governed phase: %w", err)
		}
		s.Governed = &r
		show("governed", r)
	}
	if a.cfg.wants(a.cfg.phases, "fairness") {
		r, err := runFairness(ctx, a.cfg)
		if err != nil {
			return fmt.Errorf("fairness phase: %w", err)
		}
		s.Fairness = &r
		show("fairness", r)
	}
	if a.cfg.wants(a.cfg.phases, "frontdoor") {
		r, err := runFrontDoor(ctx, a.cfg)
		if err != nil {
			return fmt.Errorf("frontdoor phase: %w", err)
		}
		s.FrontDoor = &r
		show("frontdoor", r)
	}
	if a.cfg.wants(a.cfg.phases, "batch") {
		r, err := runBatch(ctx, a.cfg)
		if err != nil {
			return fmt.Errorf("batch phase: %w", err)
		}
		s.Batch = &r
		show("batch", r)
	}
	return nil
}
