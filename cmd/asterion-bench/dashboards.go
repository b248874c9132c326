package main

// Phase dashboards: many operator dashboards open on the deferred-operations list
// (GET /admin/deferred-operations/events, signed in through the login form), and the delay
// from an operation's status change to the changed row arriving at every dashboard.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// dashboardsResult is what the dashboards phase measured.
type dashboardsResult struct {
	// Dashboards list streams were open while Prompts prompts were submitted, one every
	// 250 ms.
	Dashboards int `json:"dashboards"`
	Prompts    int `json:"prompts"`
	// Changes is how many distinct (operation, status) changes reached the dashboards.
	Changes int `json:"changes"`
	// Delivery is the row's receive time minus the time of the change in the operation's
	// status history, over every (dashboard, change) pair.
	Delivery latency `json:"delivery"`
	// Missed counts (dashboard, change) pairs never received within 15 s.
	Missed int `json:"missed"`
	// Undated counts received changes without a history entry of that status (not timed).
	Undated int `json:"undated"`
	// ByStatus is Delivery split by the status the row changed to.
	ByStatus map[string]latency `json:"by_status"`
	// First is, per change, the earliest arrival at any dashboard; Spread is, per change,
	// the last arrival minus the first.
	First  latency `json:"first"`
	Spread latency `json:"spread"`
}

// opRowRE finds operation rows (<tr id="op-…" data-status="…">) in a row event.
var opRowRE = regexp.MustCompile(`id="op-([0-9a-f-]{36})"\s+data-status="([a-z-]+)"`)

// dashCollector records, per dashboard, the first arrival of every (operation, status).
type dashCollector struct {
	streams []struct {
		mu  sync.Mutex
		got map[string]time.Time
	}
	snapshots atomic.Int64
	completed atomic.Int64
}

func (c *dashCollector) handle(i int, ev sseEvent) {
	switch ev.Name {
	case "snapshot":
		c.snapshots.Add(1)
	case "row":
		s := &c.streams[i]
		for _, m := range opRowRE.FindAllStringSubmatch(ev.Data, -1) {
			key := m[1] + "|" + m[2]
			s.mu.Lock()
			_, seen := s.got[key]
			if !seen {
				s.got[key] = ev.At
			}
			s.mu.Unlock()
			if !seen && m[2] == "completed" {
				c.completed.Add(1)
			}
		}
	}
}

// runDashboards signs in as user, opens n list streams, submits prompts through the API
// (whose operations the admin's list shows), and times each row's arrival against the
// operation's status history read from the database.
func runDashboards(ctx context.Context, api *apiClient, pool *pgxpool.Pool, user, password string, n, prompts int) (dashboardsResult, error) {
	r := dashboardsResult{Dashboards: n, Prompts: prompts}
	page := *api
	if err := page.login(ctx, user, password); err != nil {
		return r, err
	}
	c := &dashCollector{streams: make([]struct {
		mu  sync.Mutex
		got map[string]time.Time
	}, n)}
	for i := range c.streams {
		c.streams[i].got = map[string]time.Time{}
	}
	ss, err := page.openStreams(ctx, n, "/admin/deferred-operations/events", c.handle)
	if err != nil {
		return r, fmt.Errorf("open %d dashboard streams: %w", n, err)
	}
	defer closeStreams(ss)
	deadline := time.Now().Add(30 * time.Second)
	for c.snapshots.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := c.snapshots.Load(); got < int64(n) {
		return r, fmt.Errorf("only %d of %d dashboards got their snapshot in 30 s", got, n)
	}
	fmt.Fprintf(os.Stderr, "dashboards: %d open\n", n)
	time.Sleep(time.Second)
	ops := map[string]bool{}
	var opIDs []string
	for k := 0; k < prompts; k++ {
		s, err := api.submit(ctx, fmt.Sprintf("dashboard bench prompt %d", k))
		if err != nil {
			return r, err
		}
		ops[s.Operation.OperationID] = true
		opIDs = append(opIDs, s.Operation.OperationID)
		time.Sleep(250 * time.Millisecond)
	}
	deadline = time.Now().Add(15 * time.Second)
	for c.completed.Load() < int64(n*prompts) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)

	// When each status was recorded: the history entry's at, the time of the transaction that
	// made the change (see appendHistory).
	changedAt := map[string]time.Time{}
	rows, err := pool.Query(ctx, `SELECT operation_id::text, status, at FROM sa_operation_history WHERE operation_id::text = ANY($1)`, opIDs)
	if err != nil {
		return r, fmt.Errorf("read status history of the bench operations: %w", err)
	}
	for rows.Next() {
		var id, status string
		var at time.Time
		if err := rows.Scan(&id, &status, &at); err != nil {
			rows.Close()
			return r, fmt.Errorf("scan status history: %w", err)
		}
		changedAt[id+"|"+status] = at
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read status history of the bench operations: %w", err)
	}

	union := map[string]bool{}
	for i := range c.streams {
		s := &c.streams[i]
		s.mu.Lock()
		for k := range s.got {
			if ops[k[:36]] {
				union[k] = true
			}
		}
		s.mu.Unlock()
	}
	var lat []time.Duration
	byStatus := map[string][]time.Duration{}
	first, last := map[string]time.Duration{}, map[string]time.Duration{}
	for i := range c.streams {
		s := &c.streams[i]
		s.mu.Lock()
		for k := range union {
			at, ok := s.got[k]
			switch {
			case !ok:
				r.Missed++
			case changedAt[k].IsZero():
				r.Undated++
			default:
				d := at.Sub(changedAt[k])
				lat = append(lat, d)
				byStatus[k[37:]] = append(byStatus[k[37:]], d)
				if f, ok := first[k]; !ok || d < f {
					first[k] = d
				}
				if l, ok := last[k]; !ok || d > l {
					last[k] = d
				}
			}
		}
		s.mu.Unlock()
	}
	r.Changes, r.Delivery = len(union), quantiles(lat)
	var firsts, spreads []time.Duration
	for k, f := range first {
		firsts = append(firsts, f)
		spreads = append(spreads, last[k]-f)
	}
	r.First, r.Spread = quantiles(firsts), quantiles(spreads)
	r.ByStatus = map[string]latency{}
	for st, ds := range byStatus {
		r.ByStatus[st] = quantiles(ds)
	}
	return r, nil
}
