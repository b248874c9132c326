package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"asterion/identity"
	"asterion/jobs"
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
	st, err := c.jobsSettings()
	if err != nil {
		return err
	}
	cn, err := c.connect(ctx, cm, false, 2)
	if err != nil {
		return err
	}
	defer cn.close()
	p, err := identity.NewService(cn.bun).PrincipalByName(ctx, *user)
	if err != nil {
		return err
	}
	svc, err := c.newJobsService(cn, st, nil)
	if err != nil {
		return err
	}
	res, err := svc.RunSync(ctx, jobs.Viewer{OrgID: p.OrgID, UserID: p.UserID, OrgWide: p.SeesOrg(), AllOrgs: p.SeesAllOrgs()}, text)
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
