// Command asterion-bench is `make bench`: it starts the real asterion server and a bare-River
// baseline as separate processes on the same PostgreSQL, drives both from this process, and
// writes BENCHMARKS.md and bench.json with every figure beside the baseline's and as a ratio.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "baseline-server" {
		fs := flag.NewFlagSet("baseline-server", flag.ExitOnError)
		dbURL := fs.String("db", "", "database URL")
		addr := fs.String("addr", "127.0.0.1:0", "listen address")
		workers := fs.Int("workers", 10, "no-op workers")
		_ = fs.Parse(os.Args[2:])
		if err := runBaselineServer(*dbURL, *addr, *workers); err != nil {
			fmt.Fprintln(os.Stderr, "baseline:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "asterion-bench:", err)
		os.Exit(1)
	}
}

type config struct {
	bin       string
	adminURL  string
	closedFor time.Duration
	openFor   time.Duration
	openRate  int
	e2eJobs   int
	// floorWithout names the groups of records the floor phase leaves out, to read their price.
	floorWithout []string
	out          string
	// sides and phases narrow a run for investigation; a narrowed run prints its figures and
	// writes no report, so BENCHMARKS.md only ever holds complete runs.
	sides  string
	phases string
	// noWorker runs the Asterion server without its embedded workers, to see what submits cost
	// with no execution beside them (a narrowed run of the submit phases only).
	noWorker bool
	// workers is how many jobs the main pair of servers (Asterion's embedded pool and the
	// baseline's River queue) run at once. Fewer than the report's ten show what a job costs
	// the database when the machine has CPU to spare (a narrowed run only).
	workers int
	// dbPrefix names the bench's databases (<prefix>, <prefix>_baseline, <prefix>_growth), so
	// a second run on the same PostgreSQL need not drop the first one's.
	dbPrefix string
	// Sizes of the Asterion-only phases.
	streams, streamsBig, dashboards int
	pageRequests                    int
	pageSizes, growthSizes          string
	batchLines                      int
	// loadScale multiplies the counts (and the governed and fairness phases' durations) of the
	// phases that start servers of their own; below 1 while developing them.
	loadScale float64
	// clusterDir is the data directory of the bench's own PostgreSQL, started when no
	// adminURL is given.
	clusterDir string
	// budget, when positive, gives the Asterion side's org a daily token budget that large, so
	// that every submit and start reserves against it instead of finding no budget.
	budget int64
}

// defaultBudget is the suite's budget for the Asterion side's org: far more than any phase
// spends, so it is never reached, and every submit and start pays for its reservation, as with
// every feature on.
const defaultBudget = 1_000_000_000_000

// scaled is n times the load scale, at least 1.
func (c config) scaled(n int) int { return max(1, int(float64(n)*c.loadScale)) }

// scaledFor is d times the load scale.
func (c config) scaledFor(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.loadScale)
}

const allSides, allPhases = "baseline,asterion", "closed50,closed200,open,pickup,e2e,floor,streams,dashboards,growth,pages,mission,chunks,inflight,governed,fairness,frontdoor,batch"

// benchPassword is the password of the bench servers' first admin.
const benchPassword = "bench-password-1"

func (c config) narrowed() bool { return c.sides != allSides || c.phases != allPhases }

// checkNoWorker refuses -no-worker with a phase that needs jobs to run.
func (c config) checkNoWorker() error {
	if !c.noWorker {
		return nil
	}
	for _, phase := range strings.Split(c.phases, ",") {
		if p := strings.TrimSpace(phase); p != "closed50" && p != "closed200" && p != "open" {
			return fmt.Errorf("-no-worker: phase %q needs workers; use -phases with closed50, closed200 or open only", p)
		}
	}
	return nil
}

// defaultWorkers is the main pair's workers in a complete run, as the report says.
const defaultWorkers = 10

// checkWorkers refuses a worker count out of range, and any other than the report's in a
// complete run.
func (c config) checkWorkers() error {
	switch {
	case c.workers < 1 || c.workers > 5000:
		return fmt.Errorf("-workers: want 1..5000, got %d", c.workers)
	case c.workers != defaultWorkers && !c.narrowed():
		return fmt.Errorf("-workers %d: the report is written with %d workers; narrow the run with -sides or -phases", c.workers, defaultWorkers)
	}
	return nil
}

func (c config) wants(list, item string) bool {
	for _, x := range strings.Split(list, ",") {
		if strings.TrimSpace(x) == item {
			return true
		}
	}
	return false
}

func run() error {
	var cfg config
	flag.StringVar(&cfg.bin, "bin", "bin/asterion", "the asterion binary")
	flag.StringVar(&cfg.adminURL, "admin-url", os.Getenv("ASTERION_BENCH_DATABASE_URL"), "maintenance database URL of a PostgreSQL to measure against (default: the bench's own cluster)")
	flag.StringVar(&cfg.clusterDir, "cluster-dir", "", "data directory of the bench's own PostgreSQL cluster (default: in the user's cache directory)")
	flag.DurationVar(&cfg.closedFor, "closed", 10*time.Second, "duration of each closed-loop phase")
	flag.DurationVar(&cfg.openFor, "open", 30*time.Second, "duration of the open-loop phase")
	flag.IntVar(&cfg.openRate, "rate", 300, "open-loop offered submits per second")
	flag.IntVar(&cfg.e2eJobs, "e2e-jobs", 3000, "jobs in the end-to-end and floor phases")
	floorWithout := flag.String("floor-without", "", "groups of records the floor phase leaves out (comma-separated: "+strings.Join(floorGroups, ",")+")")
	flag.StringVar(&cfg.out, "out", "BENCHMARKS.md", "report path (bench.json is written beside it)")
	flag.StringVar(&cfg.sides, "sides", allSides, "which servers to measure (comma-separated)")
	flag.StringVar(&cfg.phases, "phases", allPhases, "which phases to run (comma-separated)")
	flag.BoolVar(&cfg.noWorker, "no-worker", false, "serve Asterion with --no-worker (only with -phases among closed50,closed200,open)")
	flag.IntVar(&cfg.workers, "workers", defaultWorkers, "jobs run at once by each server of the main pair (Asterion and the baseline); only in a narrowed run when not 10")
	flag.StringVar(&cfg.dbPrefix, "db-prefix", "asterion_bench", "name of the bench databases")
	flag.IntVar(&cfg.streams, "streams", 500, "mission streams open in the streams phase")
	flag.IntVar(&cfg.streamsBig, "streams-big", 1000, "mission streams open for the memory figure")
	flag.IntVar(&cfg.dashboards, "dashboards", 200, "dashboard streams open in the dashboards phase")
	flag.StringVar(&cfg.pageSizes, "page-sizes", "10000,100000,1000000", "database sizes of the pages phase (seeded prompts)")
	flag.IntVar(&cfg.pageRequests, "page-requests", 200, "sequential requests per page and size in the pages phase")
	flag.StringVar(&cfg.growthSizes, "growth-sizes", "1000,10000,100000", "backlog sizes of the growth phase")
	flag.IntVar(&cfg.batchLines, "batch-lines", 50000, "request lines of the batch phase's file")
	flag.Int64Var(&cfg.budget, "budget", defaultBudget, "the daily token budget of the Asterion side's org, so that every submit and start reserves (0: none)")
	flag.Float64Var(&cfg.loadScale, "load-scale", 1, "scale of the chunks, inflight, governed and fairness phases (below 1 while developing them)")
	flag.Parse()
	ctx := context.Background()
	if err := cfg.checkNoWorker(); err != nil {
		return err
	}
	if err := cfg.checkWorkers(); err != nil {
		return err
	}
	without, err := parseFloorWithout(*floorWithout)
	if err != nil {
		return err
	}
	cfg.floorWithout = without
	pageSizes, err := parseSizes(cfg.pageSizes)
	if err != nil {
		return err
	}
	growthSizes, err := parseSizes(cfg.growthSizes)
	if err != nil {
		return err
	}
	// Thousands of streams need thousands of descriptors here and in the server, which
	// inherits the limit.
	if err := raiseOpenFiles(uint64(4*cfg.streamsBig + 1024)); err != nil {
		return err
	}

	privateCluster := cfg.adminURL == ""
	if privateCluster {
		dir := cfg.clusterDir
		if dir == "" {
			if dir, err = benchClusterDir(); err != nil {
				return err
			}
		}
		cluster, adminURL, err := startBenchCluster(ctx, dir)
		if err != nil {
			return err
		}
		defer func() { _ = cluster.Stop(context.Background()) }()
		cfg.adminURL = adminURL
		fmt.Fprintf(os.Stderr, "== database: the bench's own PostgreSQL in %s at %s\n", cluster.Dir(), cluster.Addr())
	}

	astDB, err := freshDatabase(ctx, cfg.adminURL, cfg.dbPrefix)
	if err != nil {
		return err
	}
	baseDB, err := freshDatabase(ctx, cfg.adminURL, cfg.dbPrefix+"_baseline")
	if err != nil {
		return err
	}
	astProbeURL, err := prepareCostCounters(ctx, astDB)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warning: no database cost figures:", err)
	}
	baseProbeURL, err := prepareCostCounters(ctx, baseDB)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warning: no database cost figures:", err)
	}

	astAddr, baseAddr := freePort(), freePort()
	serveArgs := []string{"serve", "--addr", astAddr}
	if cfg.noWorker {
		serveArgs = append(serveArgs, "--no-worker")
	}
	ast := exec.Command(cfg.bin, serveArgs...)
	// The last ASTERION_WORKERS of the environment is the one the server reads.
	ast.Env = append(asterionEnv(astDB), "ASTERION_WORKERS="+strconv.Itoa(cfg.workers))
	ast.Stderr = os.Stderr
	if err := ast.Start(); err != nil {
		return fmt.Errorf("start asterion: %w", err)
	}
	defer stopProcess(ast)
	self, _ := os.Executable()
	base := exec.Command(self, "baseline-server", "--db", baseDB, "--addr", baseAddr, "--workers", strconv.Itoa(cfg.workers))
	base.Stderr = os.Stderr
	if err := base.Start(); err != nil {
		return fmt.Errorf("start baseline: %w", err)
	}
	defer stopProcess(base)
	if err := waitReady("http://" + astAddr + "/readyz"); err != nil {
		return err
	}
	if err := waitReady("http://" + baseAddr + "/readyz"); err != nil {
		return err
	}
	tokOut, err := exec.Command(cfg.bin, "token", "create", "--user", "admin", "--database-url", astDB).Output()
	if err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	if cfg.budget > 0 {
		if _, err := runCLI(cfg.bin, astDB, "", "org", "set-budget", "--tokens", strconv.FormatInt(cfg.budget, 10), "--period", "day", "default"); err != nil {
			return fmt.Errorf("set the bench org's budget: %w", err)
		}
	}
	astT := newTarget("asterion", "http://"+astAddr+"/sa-core/v1/prompt", strings.TrimSpace(string(tokOut)))
	baseT := newTarget("baseline", "http://"+baseAddr+"/submit", "")
	astProbe, err := newProbe(ctx, astProbeURL, asterionQueries)
	if err != nil {
		return err
	}
	astProbe.noWorkers = cfg.noWorker
	baseProbe, err := newProbe(ctx, baseProbeURL, baselineQueries)
	if err != nil {
		return err
	}

	rep := report{Machine: machine(), StartedAt: time.Now().UTC(), Budget: cfg.budget}
	for _, pair := range []struct {
		t        *target
		p        *probe
		r        *side
		classify func(string) string
	}{{baseT, baseProbe, &rep.Baseline, baselineStep}, {astT, astProbe, &rep.Asterion, asterionStep}} {
		if !cfg.wants(cfg.sides, pair.t.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", pair.t.name)
		closedLoop(pair.t, 10, 2*time.Second) // warm-up: connections, caches, JIT of the plans
		pair.p.drain(ctx)
		if cfg.wants(cfg.phases, "closed50") {
			pair.r.Closed50 = closedLoop(pair.t, 50, cfg.closedFor)
			pair.p.drain(ctx)
		}
		if cfg.wants(cfg.phases, "closed200") {
			pair.r.Closed200 = closedLoop(pair.t, 200, cfg.closedFor)
			pair.p.drain(ctx)
		}
		if cfg.wants(cfg.phases, "open") {
			pair.r.Open = openLoop(pair.t, cfg.openRate, cfg.openFor)
			pair.p.drain(ctx)
		}
		if cfg.wants(cfg.phases, "pickup") {
			if pair.r.Pickup, err = pair.p.pickup(ctx, pair.t, 100); err != nil {
				return err
			}
			pair.p.drain(ctx)
		}
		if cfg.wants(cfg.phases, "e2e") {
			pair.r.DBCost, err = measureCost(ctx, pair.p.pool, "e2e", pair.classify, func() (int, error) {
				pair.r.E2E, err = pair.p.endToEnd(ctx, pair.t, cfg.e2eJobs)
				return pair.r.E2E.Jobs, err
			})
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "%+v\n", *pair.r)
	}
	if cfg.wants(cfg.sides, "asterion") && cfg.wants(cfg.phases, "floor") {
		fmt.Fprintln(os.Stderr, "== floor")
		if rep.Asterion.Floor, err = floorPhase(ctx, cfg); err != nil {
			return fmt.Errorf("floor phase: %w", err)
		}
	}
	if cfg.wants(cfg.sides, "asterion") {
		ae := asterionOnly{cfg: cfg, api: newAPIClient("http://"+astAddr, astT.token), pid: ast.Process.Pid, dbURL: astDB,
			probe: astProbe, pageSizes: pageSizes, growthSizes: growthSizes}
		if err := ae.run(ctx, &rep.Asterion); err != nil {
			return err
		}
	}
	rep.Database = benchClusterLine(privateCluster)
	if cfg.narrowed() {
		printOnlyRows(rep.Asterion)
		printCostRows(rep.Asterion, rep.Baseline)
		return nil
	}
	return rep.write(cfg.out)
}

// parseSizes reads a comma-separated list of positive counts.
func parseSizes(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q in %q", f, list)
		}
		out = append(out, n)
	}
	return out, nil
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(url string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after 60 s", url)
}

func stopProcess(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = c.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = c.Process.Kill()
	}
}

// freshDatabase drops and creates a database and returns its URL.
func freshDatabase(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", adminURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	cfg := conn.Config()
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name), nil
}

func machine() string {
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s, %s/%s", runtime.NumCPU(), cpu, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
