package main

// Phase pages (issues 6 and 8): the operator pages' server time as the database grows. The
// phase seeds finished prompts, jobs and operations straight into the running server's
// database (see seed.go) in steps, and at each size requests every dashboard page 200 times in
// a row, as a signed-in admin (session cookie) or as an operator (API token, which page routes
// accept as well) of a small org (every twentieth row) or of an org whose 20,000 rows are all
// older than the rest.

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pagesResult is what the pages phase measured, one entry per database size.
type pagesResult struct {
	Sizes []pagesAtSize `json:"sizes"`
}

// pagesAtSize is one database size and the page timings at it.
type pagesAtSize struct {
	// Seeded is how many finished prompts (each with its job, operation and two history
	// entries) the bench seeded in all; Jobs and Operations count every row, the earlier
	// phases' included.
	Seeded     int   `json:"seeded"`
	Jobs       int64 `json:"jobs"`
	Operations int64 `json:"operations"`
	// SeedSeconds is how long this step's seeding took (inserts and counter compaction),
	// VacuumSeconds the VACUUM (ANALYZE) after it.
	SeedSeconds   float64      `json:"seed_seconds"`
	VacuumSeconds float64      `json:"vacuum_seconds"`
	Pages         []pageTiming `json:"pages"`
}

// pageTiming is one page's time: from sending the request to the last byte of the answer,
// over sequential requests on a keep-alive connection.
type pageTiming struct {
	Name    string `json:"name"`
	Example string `json:"example"`
	latency
	// Errors counts answers other than 200; Statuses lists which.
	Errors   int         `json:"errors"`
	Statuses map[int]int `json:"statuses,omitempty"`
	// Capped is true when the requests stopped at the time cap, before n.
	Capped bool `json:"capped,omitempty"`
	// Bytes is the size of the last answer.
	Bytes int `json:"bytes"`
}

// seededID is the id seed.go gives row i of kind ("prompt", "job" or "op"): the md5 of
// "bench-<i>" with its last byte set by kind.
func seededID(kind string, i int) string {
	sum := md5.Sum([]byte(fmt.Sprintf("bench-%d", i)))
	h := hex.EncodeToString(sum[:])[:30] + map[string]string{"prompt": "a1", "job": "b2", "op": "c3"}[kind]
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// pagesEnv is what the pages phase needs of the running server.
type pagesEnv struct {
	api      *apiClient
	bin      string
	dbURL    string
	user     string
	password string
	sizes    []int
	requests int
}

// The orgs the pages phase adds beside the admin's: a small one holding every twentieth seeded
// row, and one whose rows are all older than everything else (an org that was busy once).
const (
	benchSmallOrg    = "bench-other"
	benchOperator    = "bench-operator"
	benchOldOrg      = "bench-old"
	benchOldOperator = "bench-old-operator"
	// benchOldRows is how many finished prompts the old org has, at every size.
	benchOldRows = 20000
	// benchOldFrom numbers the old org's rows apart from the others.
	benchOldFrom = 100000000
)

// runCLI runs the asterion binary against dbURL and returns its standard output.
func runCLI(bin, dbURL string, stdin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("asterion %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// ensureOperator creates org with an operator named name (once) and returns a new API token
// of that operator.
func ensureOperator(bin, dbURL, org, name string) (string, error) {
	if _, err := runCLI(bin, dbURL, "", "org", "create", org); err != nil && !strings.Contains(err.Error(), "exists") {
		return "", err
	}
	if _, err := runCLI(bin, dbURL, "", "user", "create", "--org", org, "--name", name, "--role", "operator"); err != nil &&
		!strings.Contains(err.Error(), "exists") {
		return "", err
	}
	return runCLI(bin, dbURL, "", "token", "create", "--user", name)
}

// runPages seeds the database up to each size in turn and times the pages at each.
func runPages(ctx context.Context, e pagesEnv) (pagesResult, error) {
	var r pagesResult
	opTok, err := ensureOperator(e.bin, e.dbURL, benchSmallOrg, benchOperator)
	if err != nil {
		return r, err
	}
	oldTok, err := ensureOperator(e.bin, e.dbURL, benchOldOrg, benchOldOperator)
	if err != nil {
		return r, err
	}
	admin := *e.api
	if err := admin.login(ctx, e.user, e.password); err != nil {
		return r, err
	}
	operator, oldOperator := e.api.withToken(opTok), e.api.withToken(oldTok)
	pool, err := pgxpool.New(ctx, e.dbURL)
	if err != nil {
		return r, fmt.Errorf("connect for seeding: %w", err)
	}
	defer pool.Close()
	sd, err := newSeeder(ctx, pool)
	if err != nil {
		return r, err
	}
	var who [3]owner
	for k, name := range []string{e.user, benchOperator, benchOldOperator} {
		if who[k], err = sd.ownerOf(ctx, name); err != nil {
			return r, err
		}
	}
	// Seeded row 0 is a minute old; the old org's rows are 30 days older than the oldest row
	// of the largest size.
	base := sd.now.Add(-time.Minute)
	oldBase := base.Add(-time.Duration(e.sizes[len(e.sizes)-1])*2500*time.Millisecond - 30*24*time.Hour)
	rng := rand.New(rand.NewPCG(1, 2))
	seeded := 0
	for _, size := range e.sizes {
		if size <= seeded {
			continue
		}
		start := time.Now()
		if seeded == 0 {
			old := seedBatch{from: benchOldFrom, to: benchOldFrom + benchOldRows, base: oldBase, rest: who[2], every20th: who[2]}
			if err := sd.seedFinished(ctx, old); err != nil {
				return r, err
			}
		}
		if err := sd.seedFinished(ctx, seedBatch{from: seeded, to: size, base: base, rest: who[0], every20th: who[1]}); err != nil {
			return r, err
		}
		at := pagesAtSize{Seeded: size, SeedSeconds: time.Since(start).Seconds()}
		seeded = size
		start = time.Now()
		if err := sd.vacuumAnalyze(ctx); err != nil {
			return r, err
		}
		at.VacuumSeconds = time.Since(start).Seconds()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sa_job), (SELECT count(*) FROM sa_operation)`).Scan(&at.Jobs, &at.Operations); err != nil {
			return r, fmt.Errorf("count rows: %w", err)
		}
		fmt.Fprintf(os.Stderr, "pages: seeded to %d in %.1f s, VACUUM (ANALYZE) %.1f s (%d jobs, %d operations)\n", size, at.SeedSeconds, at.VacuumSeconds, at.Jobs, at.Operations)
		if err := checkSeeded(ctx, &admin, rng.IntN(size)); err != nil {
			return r, err
		}
		// The time of the median seeded row, for a range that starts deep in the index.
		mid := base.Add(-time.Duration(size/2) * 2500 * time.Millisecond).UTC().Format("2006-01-02T15:04:05")
		pages := []struct {
			name string
			c    *apiClient
			path func() string
		}{
			{"operations list", &admin, fixed("/admin/deferred-operations/list")},
			{"operations page (full)", &admin, fixed("/admin/deferred-operations")},
			{"operation detail", &admin, func() string { return "/admin/deferred-operations/" + seededID("op", rng.IntN(size)) }},
			{"jobs list", &admin, fixed("/admin/jobs/list")},
			{"jobs page (full)", &admin, fixed("/admin/jobs")},
			{"job detail", &admin, func() string { return "/admin/jobs/" + seededID("job", rng.IntN(size)) }},
			{"operations list, status=failed", &admin, fixed("/admin/deferred-operations/list?status=failed")},
			{"operations list, org filter (5 % of rows)", &admin, fixed("/admin/deferred-operations/list?org=" + benchSmallOrg)},
			{"operations list, older than the median row", &admin, fixed("/admin/deferred-operations/list?to=" + url.QueryEscape(mid))},
			{"operations search by id", &admin, func() string {
				return "/admin/deferred-operations/list?q=" + seededID("op", rng.IntN(size))
			}},
			{"jobs list, state=failed", &admin, fixed("/admin/jobs/list?state=failed")},
			{"jobs list, state=queued (none seeded)", &admin, fixed("/admin/jobs/list?state=queued")},
			{"jobs list, org filter (5 % of rows)", &admin, fixed("/admin/jobs/list?org=" + benchSmallOrg)},
			{"jobs list, last hour", &admin, fixed("/admin/jobs/list?range=1h")},
			{"operations list as operator of the small org", operator, fixed("/admin/deferred-operations/list")},
			{"jobs list as operator of the small org", operator, fixed("/admin/jobs/list")},
			{"operations list as operator of the old org", oldOperator, fixed("/admin/deferred-operations/list")},
			{"jobs list as operator of the old org", oldOperator, fixed("/admin/jobs/list")},
			{"jobs list, org filter on the old org", &admin, fixed("/admin/jobs/list?org=" + benchOldOrg)},
		}
		for _, p := range pages {
			pt, err := timePage(ctx, p.c, p.name, p.path, e.requests)
			if err != nil {
				return r, err
			}
			fmt.Fprintf(os.Stderr, "pages: %7d rows  %-48s p50 %6.1f ms  p95 %6.1f ms  n %d  errors %d %v  %d bytes\n", size, p.name, pt.P50ms, pt.P95ms, pt.N, pt.Errors, pt.Statuses, pt.Bytes)
			at.Pages = append(at.Pages, pt)
		}
		r.Sizes = append(r.Sizes, at)
	}
	return r, nil
}

func fixed(path string) func() string { return func() string { return path } }

// pageTimeCap bounds the time spent on one page at one size, so a page that takes seconds
// cannot hold the run for minutes.
const pageTimeCap = 20 * time.Second

// timePage requests path() n times in a row (or for pageTimeCap) after two unmeasured warm-up
// requests.
func timePage(ctx context.Context, c *apiClient, name string, path func() string, n int) (pageTiming, error) {
	pt := pageTiming{Name: name, Example: path()}
	for k := 0; k < 2; k++ {
		if _, _, _, err := c.get(ctx, path()); err != nil {
			return pt, err
		}
	}
	ds := make([]time.Duration, 0, n)
	stop := time.Now().Add(pageTimeCap)
	for k := 0; k < n; k++ {
		if time.Now().After(stop) {
			pt.Capped = true
			break
		}
		status, size, d, err := c.get(ctx, path())
		if err != nil {
			return pt, err
		}
		if status != 200 {
			pt.Errors++
			if pt.Statuses == nil {
				pt.Statuses = map[int]int{}
			}
			pt.Statuses[status]++
		}
		pt.Bytes = size
		ds = append(ds, d)
	}
	pt.latency = quantiles(ds)
	return pt, nil
}

// checkSeeded fetches seeded operation i's page and checks it renders with a verified history
// chain, so the timings are of real pages.
func checkSeeded(ctx context.Context, c *apiClient, i int) error {
	body, err := c.fetch(ctx, "/admin/deferred-operations/"+seededID("op", i))
	if err != nil {
		return err
	}
	if !strings.Contains(body, `data-chain="verified"`) {
		return fmt.Errorf("seeded operation %s: its page does not show a verified history chain", seededID("op", i))
	}
	return nil
}
