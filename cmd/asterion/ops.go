package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/maintenance"
	"asterion/jobs/readmodel"
)

// The operator commands on jobs (docs/cli.md). They talk to the database directly, so it acts
// with an admin's view of every org.
var cliViewer = jobs.Viewer{AllOrgs: true, OrgWide: true}

var cliActor = jobs.Actor{Name: "cli"}

// opsEnv opens what an operator command needs.
func (c *cli) opsEnv(ctx context.Context, cm *common) (*conn, *jobs.Service, error) {
	st, err := c.jobsSettings()
	if err != nil {
		return nil, nil, err
	}
	cn, err := c.connect(ctx, cm, false, 4)
	if err != nil {
		return nil, nil, err
	}
	svc, _, err := c.newJobsService(cn, st, nil)
	if err != nil {
		cn.close()
		return nil, nil, err
	}
	return cn, svc, nil
}

func parseJobID(cmd string, args []string) (uuid.UUID, error) {
	if len(args) != 1 {
		return uuid.Nil, usagef("usage: asterion %s ID", cmd)
	}
	id, err := uuid.Parse(args[0])
	if err != nil {
		return uuid.Nil, usagef("%s: %q is not a job id (want a UUID)", cmd, args[0])
	}
	return id, nil
}

// notFoundOr turns ErrNotFound into a one-line "no job" error.
func notFoundOr(id uuid.UUID, err error) error {
	if errors.Is(err, jobs.ErrNotFound) {
		return fmt.Errorf("no job %s", id)
	}
	return err
}

func (c *cli) listJobs(ctx context.Context, args []string) error {
	fs := newFlags("list-jobs")
	cm := c.bindCommon(fs)
	state := fs.String("state", "", "only jobs in this state")
	org := fs.String("org", "", "only jobs of this org")
	since := fs.String("since", "", "only jobs created at or after this time (RFC 3339 or a duration like 1h)")
	limit := fs.Int("limit", 100, "at most this many jobs (1..500)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("list-jobs: unexpected argument %q", fs.Arg(0))
	}
	f := readmodel.JobFilter{Limit: *limit}
	if *limit < 1 || *limit > 500 {
		return usagef("list-jobs: --limit must be 1..500")
	}
	if *state != "" {
		st, err := jobs.ParseState(*state)
		if err != nil {
			return usagef("list-jobs: %v", err)
		}
		f.State = st
	}
	if *since != "" {
		t, err := parseSince(*since)
		if err != nil {
			return usagef("list-jobs: --since: %v", err)
		}
		f.Since = &t
	}
	cn, svc, err := c.opsEnv(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	if *org != "" {
		o, err := identity.NewService(cn.bun).OrgByName(ctx, *org)
		if err != nil {
			return err
		}
		f.OrgID = o.ID
	}
	list, _, err := readmodel.Of(svc).ListJobs(ctx, cliViewer, f)
	if err != nil {
		return err
	}
	if cm.json {
		return writeJSON(c, jobsJSON(list))
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tPRIO\tATTEMPT\tORG\tCREATED\tERROR")
	for _, j := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%d\t%s\t%s\n", j.ID, j.State, j.Priority, j.Attempt, j.MaxAttempts, j.OrgID,
			j.CreatedAt.UTC().Format(time.RFC3339), deref(j.ErrorKind))
	}
	return tw.Flush()
}

// parseSince accepts an RFC 3339 time or a duration back from now.
func parseSince(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want an RFC 3339 time, a date or a duration, got %q", s)
}

func (c *cli) jobDetails(ctx context.Context, args []string) error {
	fs := newFlags("job-details")
	cm := c.bindCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := parseJobID("job-details", fs.Args())
	if err != nil {
		return err
	}
	cn, svc, err := c.opsEnv(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	d, err := readmodel.Of(svc).GetJob(ctx, cliViewer, id)
	if err != nil {
		return notFoundOr(id, err)
	}
	if cm.json {
		return writeJSON(c, map[string]any{"job": jobJSONOf(d.Job), "history": jobsJSON(d.History)})
	}
	j := d.Job
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"job", j.ID.String()}, {"prompt", j.PromptID.String()}, {"state", j.State},
		{"priority", fmt.Sprint(j.Priority)}, {"attempt", fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts)},
		{"org", fmt.Sprint(j.OrgID)}, {"created by", fmt.Sprint(j.CreatedBy)},
		{"created", j.CreatedAt.UTC().Format(time.RFC3339Nano)}, {"updated", j.UpdatedAt.UTC().Format(time.RFC3339Nano)},
		{"claim", deref(j.WorkerClaim)}, {"error", strings.TrimSpace(deref(j.ErrorKind) + " " + deref(j.ErrorMessage))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	fmt.Fprintln(tw, "\nHISTORY\tSTATE\tATTEMPT\tSUPERSEDES\tCREATED")
	for _, h := range d.History {
		sup := ""
		if h.Supersedes != nil {
			sup = h.Supersedes.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\n", h.ID, h.State, h.Attempt, h.MaxAttempts, sup, h.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// jobAction runs a one-job operator command (cancel-job, retry-job): its flags, the job id,
// the database, and the one-line error for a job in the wrong state (conflict).
func (c *cli) jobAction(ctx context.Context, cmd string, args []string, conflict string,
	act func(svc *jobs.Service, id uuid.UUID, cm *common) error) error {
	fs := newFlags(cmd)
	cm := c.bindCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := parseJobID(cmd, fs.Args())
	if err != nil {
		return err
	}
	cn, svc, err := c.opsEnv(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	err = act(svc, id, cm)
	if errors.Is(err, jobs.ErrConflict) {
		return fmt.Errorf("job %s cannot be %s", id, conflict)
	}
	if err != nil {
		return notFoundOr(id, err)
	}
	return nil
}

func (c *cli) cancelJob(ctx context.Context, args []string) error {
	return c.jobAction(ctx, "cancel-job", args, "cancelled: it is already finished",
		func(svc *jobs.Service, id uuid.UUID, cm *common) error {
			j, err := svc.Cancel(ctx, cliViewer, id, cliActor)
			if err != nil {
				return err
			}
			if cm.json {
				return writeJSON(c, jobJSONOf(j))
			}
			fmt.Fprintf(c.stdout, "cancelled job %s\n", j.ID)
			return nil
		})
}

func (c *cli) retryJob(ctx context.Context, args []string) error {
	return c.jobAction(ctx, "retry-job", args, "retried: only succeeded, failed or cancelled jobs can",
		func(svc *jobs.Service, id uuid.UUID, cm *common) error {
			out, err := svc.Retry(ctx, cliViewer, id, cliActor)
			if err != nil {
				return err
			}
			if cm.json {
				return writeJSON(c, map[string]any{"job": jobJSONOf(out.Job), "operation": out.Operation})
			}
			fmt.Fprintf(c.stdout, "job %s supersedes %s\n", out.Job.ID, id)
			return nil
		})
}

func (c *cli) queueMetrics(ctx context.Context, args []string) error {
	fs := newFlags("queue-metrics")
	cm := c.bindCommon(fs)
	window := fs.Duration("window", time.Hour, "the window of the per-org figures")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *window <= 0 {
		return usagef("usage: asterion queue-metrics [--window=1h]")
	}
	cn, svc, err := c.opsEnv(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	m, err := readmodel.Of(svc).QueueMetrics(ctx, cliViewer, *window)
	if err != nil {
		return err
	}
	if cm.json {
		return writeJSON(c, m)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tJOBS")
	for _, st := range []string{"queued", "running", "succeeded", "failed", "cancelled", "superseded"} {
		fmt.Fprintf(tw, "%s\t%d\n", st, m.Counts[st])
	}
	fmt.Fprintf(tw, "\nORG (last %s)\tFINISHED\tERROR RATE\tWAIT P50/P95\tRUN P50/P95\tTOKENS IN/OUT\tCOST\tERRORS\n", m.Window)
	for _, o := range m.Orgs {
		var kinds []string
		for k, n := range o.ErrorsByKind {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.2fs/%.2fs\t%.2fs/%.2fs\t%d/%d\t$%.4f\t%s\n", o.OrgName, o.Finished, o.ErrorRate*100,
			o.QueueWaitP50, o.QueueWaitP95, o.RunTimeP50, o.RunTimeP95, o.Usage.InputTokens, o.Usage.OutputTokens,
			o.Usage.CostUSD, strings.Join(kinds, " "))
	}
	return tw.Flush()
}

func (c *cli) archiveOldJobs(ctx context.Context, args []string) error {
	fs := newFlags("archive-old-jobs")
	cm := c.bindCommon(fs)
	before := fs.String("before", "", "archive terminal jobs created before this date (YYYY-MM-DD or RFC 3339)")
	batch := fs.Int("batch-size", 1000, "rows moved per transaction")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *before == "" || fs.NArg() > 0 || *batch < 1 {
		return usagef("usage: asterion archive-old-jobs --before=DATE [--batch-size=N]")
	}
	cutoff, err := time.Parse("2006-01-02", *before)
	if err != nil {
		cutoff, err = time.Parse(time.RFC3339Nano, *before)
	}
	if err != nil {
		return usagef("archive-old-jobs: --before: want YYYY-MM-DD or an RFC 3339 time, got %q", *before)
	}
	cn, svc, err := c.opsEnv(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	n, err := maintenance.ArchiveOldJobs(ctx, svc.DB(), cutoff, *batch)
	if err != nil {
		return err
	}
	if cm.json {
		return writeJSON(c, map[string]int64{"archived": n})
	}
	fmt.Fprintf(c.stdout, "archived %d job(s)\n", n)
	return nil
}

func (c *cli) reclaimStuckJobs(ctx context.Context, args []string) error {
	fs := newFlags("reclaim-stuck-jobs")
	cm := c.bindCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("usage: asterion reclaim-stuck-jobs")
	}
	cn, svc, err := c.opsEnv(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	rep, err := svc.ReclaimStuck(ctx)
	if err != nil {
		return err
	}
	if cm.json {
		return writeJSON(c, rep)
	}
	fmt.Fprintf(c.stdout, "requeued %d, failed as stuck %d, moved off orphaned vehicles %d\n", rep.Requeued, rep.Failed, rep.Revehicled)
	return nil
}

func writeJSON(c *cli, v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jobJSONOf is the command line's JSON of a job: the database row's fields in snake case.
func jobJSONOf(j db.Job) map[string]any {
	return map[string]any{"job_id": j.ID, "prompt_id": j.PromptID, "state": j.State, "priority": j.Priority,
		"attempt": j.Attempt, "max_attempts": j.MaxAttempts, "error_kind": j.ErrorKind, "error_message": j.ErrorMessage,
		"supersedes": j.Supersedes, "response_id": j.ResponseID, "worker_claim": j.WorkerClaim, "org_id": j.OrgID,
		"created_by": j.CreatedBy, "created_at": j.CreatedAt.UTC(), "updated_at": j.UpdatedAt.UTC(),
		"started_at": j.StartedAt, "finished_at": j.FinishedAt, "operation_id": j.OperationID}
}

func jobsJSON(list []db.Job) []map[string]any {
	out := make([]map[string]any, len(list))
	for i, j := range list {
		out[i] = jobJSONOf(j)
	}
	return out
}
