package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The bare-River baseline: a minimal server whose submit is one transaction inserting a prompt
// row, a job row and a River job (riverpgxv5), with no-op workers. It is what Asterion is
// compared against, on the same database server and machine, in the same run.

type noopArgs struct {
	JobID string `json:"job_id"`
}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	pool *pgxpool.Pool
}

func (w *noopWorker) Work(ctx context.Context, j *river.Job[noopArgs]) error {
	_, err := w.pool.Exec(ctx, `UPDATE bench_job SET state = 'succeeded', finished_at = now() WHERE id = $1`, j.Args.JobID)
	return err
}

const baselineSchema = `
CREATE TABLE IF NOT EXISTS bench_prompt (id UUID PRIMARY KEY, body TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS bench_job (id UUID PRIMARY KEY, prompt_id UUID NOT NULL REFERENCES bench_prompt (id),
  state TEXT NOT NULL DEFAULT 'queued', priority SMALLINT NOT NULL DEFAULT 50, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  claimed_at TIMESTAMPTZ, finished_at TIMESTAMPTZ);`

// runBaselineServer serves POST /submit on addr until SIGTERM.
func runBaselineServer(dbURL, addr string, workers int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	mig, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, baselineSchema); err != nil {
		return err
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{pool: pool})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{"bench": {MaxWorkers: workers}},
		Workers: ws,
		// The same fetch settings as Asterion's worker client, so the comparison is of the
		// work each job does, not of River's defaults.
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 500 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /submit", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Prompt string `json:"prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		promptID, jobID := uuid.New(), uuid.New()
		err := pgx.BeginFunc(r.Context(), pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(r.Context(), `INSERT INTO bench_prompt (id, body) VALUES ($1, $2)`, promptID, body.Prompt); err != nil {
				return err
			}
			if _, err := tx.Exec(r.Context(), `INSERT INTO bench_job (id, prompt_id) VALUES ($1, $2)`, jobID, promptID); err != nil {
				return err
			}
			_, err := client.InsertTx(r.Context(), tx, noopArgs{JobID: jobID.String()}, &river.InsertOpts{Queue: "bench"})
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"prompt_id":%q,"job_id":%q,"state":"queued"}`, promptID, jobID)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	fmt.Fprintln(os.Stderr, "baseline serving on", ln.Addr())
	err = srv.Serve(ln)
	_ = client.Stop(context.Background())
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}
