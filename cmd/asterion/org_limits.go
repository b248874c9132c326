package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"asterion/db"
	jobusage "asterion/jobs/usage"
)

const (
	orgSetBudgetUsage = "usage: asterion org set-budget NAME (--tokens N --period day|month | --clear)"
	orgSetWeightUsage = "usage: asterion org set-weight NAME N"
)

// orgSetBudget is `asterion org set-budget NAME --tokens N --period day|month` (or --clear):
// once the org's usage in the current UTC period reaches N tokens, its submits answer 429
// until the period ends.
func (c *cli) orgSetBudget(ctx context.Context, args []string) error {
	fs := newFlags("org set-budget")
	cm := c.bindCommon(fs)
	tokens := fs.Int64("tokens", 0, "tokens per period (at least 1)")
	period := fs.String("period", "", "day or month (UTC)")
	clearBudget := fs.Bool("clear", false, "remove the org's budget")
	names, err := parseWithNames(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 || *clearBudget == (*tokens != 0 || *period != "") {
		return usagef(orgSetBudgetUsage)
	}
	var b jobusage.Budget
	if !*clearBudget {
		p, err := jobusage.ParsePeriod(*period)
		if err != nil {
			return usagef("--period: %v", err)
		}
		if *tokens < 1 {
			return usagef("--tokens: want a whole number of at least 1, got %d", *tokens)
		}
		b = jobusage.Budget{Tokens: *tokens, Period: p}
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	orgID, err := orgIDByName(ctx, cn, names[0])
	if err != nil {
		return err
	}
	m, err := jobusage.New(jobusage.Config{DB: cn.bun})
	if err != nil {
		return err
	}
	if err := m.SetBudget(ctx, orgID, b); err != nil {
		return err
	}
	if cm.json {
		out := map[string]any{"org": names[0], "budget": nil}
		if b.Tokens > 0 {
			out["budget"] = map[string]any{"tokens": b.Tokens, "period": b.Period}
		}
		return writeJSON(c, out)
	}
	if b.Tokens == 0 {
		fmt.Fprintf(c.stdout, "removed the budget of org %s\n", names[0])
		return nil
	}
	fmt.Fprintf(c.stdout, "org %s may use %d tokens a %s (UTC)\n", names[0], b.Tokens, b.Period)
	return nil
}

// orgSetWeight is `asterion org set-weight NAME N`: the org's weight in the fair share of
// running slots (default 1).
func (c *cli) orgSetWeight(ctx context.Context, args []string) error {
	fs := newFlags("org set-weight")
	cm := c.bindCommon(fs)
	names, err := parseWithNames(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 2 {
		return usagef(orgSetWeightUsage)
	}
	weight, err := strconv.Atoi(names[1])
	if err != nil || weight < 1 || weight > 1000 {
		return usagef("weight: want a whole number from 1 to 1000, got %q", names[1])
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	orgID, err := orgIDByName(ctx, cn, names[0])
	if err != nil {
		return err
	}
	if _, err := cn.bun.NewInsert().Model(&db.OrgShare{OrgID: orgID, Weight: weight}).
		On("CONFLICT (org_id) DO UPDATE").Set("weight = EXCLUDED.weight, updated_at = now()").Exec(ctx); err != nil {
		return fmt.Errorf("set the weight of org %s: %w", names[0], err)
	}
	if cm.json {
		return writeJSON(c, map[string]any{"org": names[0], "weight": weight})
	}
	fmt.Fprintf(c.stdout, "org %s has weight %d\n", names[0], weight)
	return nil
}

// parseWithNames parses flags that may come before, between or after positional arguments.
func parseWithNames(fs interface {
	Parse([]string) error
	NArg() int
	Arg(int) string
	Args() []string
	Name() string
}, args []string) ([]string, error) {
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return names, nil
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// orgIDByName returns the id of the org called name.
func orgIDByName(ctx context.Context, cn *conn, name string) (int64, error) {
	var id int64
	err := cn.bun.NewSelect().Table("orgs").Column("id").Where("name = ?", name).Scan(ctx, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("no org named %q", name)
	}
	if err != nil {
		return 0, fmt.Errorf("find org %s: %w", name, err)
	}
	return id, nil
}
