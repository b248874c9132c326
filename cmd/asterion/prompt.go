package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/eta"
)

// promptRun runs `asterion prompt run [--user NAME] TEXT`: the synchronous path, printing the
// answer. A failed prompt prints its error kind and exits 1.
func (c *cli) promptRun(ctx context.Context, args []string) error {
	fs := newFlags("prompt run")
	cm := c.bindCommon(fs)
	user := fs.String("user", "admin", "run as this user")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	text := strings.Join(fs.Args(), " ")
	if strings.TrimSpace(text) == "" {
		return usagef("usage: asterion prompt run [--user NAME] TEXT")
	}
	svc, v, closeDB, err := c.promptService(ctx, cm, *user)
	if err != nil {
		return err
	}
	defer closeDB()
	res, err := svc.RunSync(ctx, v, text)
	if err != nil {
		return err
	}
	if cm.json {
		out := map[string]any{"job_id": res.Job.ID, "prompt_id": res.Job.PromptID, "state": res.Job.State,
			"error_kind": res.Job.ErrorKind, "error_message": res.Job.ErrorMessage}
		if res.Response != nil {
			out["response_id"], out["response"] = res.Response.ID, res.Response.Body
		}
		if err := json.NewEncoder(c.stdout).Encode(out); err != nil {
			return err
		}
	} else if res.Response != nil {
		fmt.Fprintln(c.stdout, res.Response.Body)
	}
	if res.Job.State != string(jobs.StateSucceeded) {
		return fmt.Errorf("prompt failed (job %s): %s: %s", res.Job.ID, deref(res.Job.ErrorKind), deref(res.Job.ErrorMessage))
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// promptSubmit runs `asterion prompt submit [--user NAME] [--priority N] [--at TIME] TEXT`:
// the asynchronous path, as POST /sa-core/v1/prompt. It queues the prompt and prints its job,
// prompt and operation; a worker (`serve` or `run-worker`) runs it. --at schedules it.
func (c *cli) promptSubmit(ctx context.Context, args []string) error {
	fs := newFlags("prompt submit")
	cm := c.bindCommon(fs)
	user := fs.String("user", "admin", "submit as this user")
	priority := fs.Int("priority", jobs.DefaultPriority, "0..100, lower runs first")
	at := fs.String("at", "", "run at this time: RFC 3339 (2026-12-01T18:00:00Z) or from now (+10m)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	text := strings.Join(fs.Args(), " ")
	if strings.TrimSpace(text) == "" {
		return usagef("usage: asterion prompt submit [--user NAME] [--priority N] [--at TIME] TEXT")
	}
	var scheduled *time.Time
	if *at != "" {
		t, err := parseAt(*at, time.Now())
		if err != nil {
			return usagef("prompt submit: --at %q: %v", *at, err)
		}
		scheduled = &t
	}
	svc, v, closeDB, err := c.promptService(ctx, cm, *user)
	if err != nil {
		return err
	}
	defer closeDB()
	out, err := svc.Submit(ctx, jobs.SubmitRequest{Viewer: v, Prompt: text, Priority: priority, ScheduledFor: scheduled})
	var verr *jobs.ValidationError
	if errors.As(err, &verr) {
		return fmt.Errorf("prompt refused: %s", fieldProblems(verr.Fields))
	}
	if err != nil {
		return err
	}
	var est eta.ETA
	known := out.ETA != nil
	if known {
		est = *out.ETA
	} else if est, known, err = svc.ETAs().Job(ctx, out.JobID); err != nil {
		return err
	}
	if cm.json {
		doc := map[string]any{"prompt_id": out.PromptID, "job_id": out.JobID, "state": out.State,
			"operation_id": out.Operation.OperationID, "status_href": out.Operation.StatusHref, "scheduled_for": nil}
		if scheduled != nil {
			doc["scheduled_for"] = scheduled.UTC().Format(time.RFC3339Nano)
		}
		if known {
			doc["eta_seconds"] = est.Seconds
		}
		return writeJSON(c, doc)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	rows := [][2]string{{"job", out.JobID.String()}, {"prompt", out.PromptID.String()}, {"state", string(out.State)},
		{"operation", out.Operation.OperationID.String()}}
	if scheduled != nil {
		rows = append(rows, [2]string{"scheduled for", scheduled.UTC().Format(time.RFC3339)})
	}
	if known {
		rows = append(rows, [2]string{"starts in about", fmt.Sprintf("%d s", est.Seconds)})
	}
	for _, kv := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

// parseAt reads the time of --at: RFC 3339, or "+" and a positive Go duration from now.
func parseAt(s string, now time.Time) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return time.Time{}, errors.New("want +DURATION such as +10m or +1h30m")
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want an RFC 3339 time such as 2026-12-01T18:00:00Z, or +DURATION such as +10m")
	}
	return t, nil
}

// fieldProblems is a validation error on one line: "field rule; field rule".
func fieldProblems(fields map[string]string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + fields[k]
	}
	return strings.Join(parts, "; ")
}

// promptService connects to the database and builds the jobs service the prompt commands run
// prompts through, with the viewer of user; closeDB ends the connection.
func (c *cli) promptService(ctx context.Context, cm *common, user string) (svc *jobs.Service, v jobs.Viewer, closeDB func(), err error) {
	st, err := c.jobsSettings()
	if err != nil {
		return nil, v, nil, err
	}
	cn, err := c.connect(ctx, cm, false, 2)
	if err != nil {
		return nil, v, nil, err
	}
	p, err := identity.NewService(cn.bun).PrincipalByName(ctx, user)
	if err != nil {
		cn.close()
		return nil, v, nil, err
	}
	if svc, _, err = c.newJobsService(cn, st, nil); err != nil {
		cn.close()
		return nil, v, nil, err
	}
	v = jobs.Viewer{OrgID: p.OrgID, UserID: p.UserID, OrgWide: p.SeesOrg(), AllOrgs: p.SeesAllOrgs()}
	return svc, v, func() { cn.close() }, nil
}
