package main

import (
	"context"
	"fmt"

	"asterion/jobs/flowctl"
)

const (
	orgPauseUsage   = "usage: asterion org pause|resume NAME"
	modelPauseUsage = "usage: asterion model pause|resume MODEL"
)

// flowControl opens the database for a pause command.
func (c *cli) flowControl(ctx context.Context, cm *common) (*conn, *flowctl.Control, error) {
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return nil, nil, err
	}
	fc, err := flowctl.New(flowctl.Config{DB: cn.bun})
	if err != nil {
		cn.close()
		return nil, nil, err
	}
	return cn, fc, nil
}

// orgPause is `asterion org pause NAME` (paused) or `asterion org resume NAME`: while an org is
// paused its queued jobs wait; running jobs finish. The change is audited.
func (c *cli) orgPause(ctx context.Context, verb string, args []string) error {
	fs := newFlags("org " + verb)
	cm := c.bindCommon(fs)
	names, err := parseWithNames(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usagef(orgPauseUsage)
	}
	paused := verb == "pause"
	cn, fc, err := c.flowControl(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	orgID, err := orgIDByName(ctx, cn, names[0])
	if err != nil {
		return err
	}
	if err := fc.SetOrgPaused(ctx, cliViewer, cliActor, orgID, paused); err != nil {
		return fmt.Errorf("%s org %s: %w", verb, names[0], err)
	}
	if cm.json {
		return writeJSON(c, map[string]any{"org": names[0], "paused": paused})
	}
	fmt.Fprintf(c.stdout, "org %s is %s\n", names[0], pausedWord(paused))
	return nil
}

// modelPause is `asterion model pause MODEL` or `asterion model resume MODEL`: while a model
// is paused no process calls it, for any org. The change is audited.
func (c *cli) modelPause(ctx context.Context, verb string, args []string) error {
	fs := newFlags("model " + verb)
	cm := c.bindCommon(fs)
	names, err := parseWithNames(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 || names[0] == "" {
		return usagef(modelPauseUsage)
	}
	paused := verb == "pause"
	cn, fc, err := c.flowControl(ctx, cm)
	if err != nil {
		return err
	}
	defer cn.close()
	if err := fc.SetModelPaused(ctx, cliViewer, cliActor, names[0], paused); err != nil {
		return fmt.Errorf("%s model %s: %w", verb, names[0], err)
	}
	if cm.json {
		return writeJSON(c, map[string]any{"model": names[0], "paused": paused})
	}
	fmt.Fprintf(c.stdout, "model %s is %s\n", names[0], pausedWord(paused))
	return nil
}

func pausedWord(paused bool) string {
	if paused {
		return "paused"
	}
	return "resumed"
}
