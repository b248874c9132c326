package main

import (
	"context"
	"encoding/json"
	"fmt"

	"asterion/db"
)

// migrate runs `asterion migrate [up|down|status] [--all]`.
func (c *cli) migrate(ctx context.Context, args []string) error {
	fs := newFlags("migrate")
	cm := c.bindCommon(fs)
	all := fs.Bool("all", false, "with down: roll back every app migration and River's schema")
	dir := "up"
	if len(args) > 0 && (args[0] == "up" || args[0] == "down" || args[0] == "status") {
		dir, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("migrate: want up, down or status, got %q", fs.Arg(0))
	}
	// A migration's DDL may run longer than any request's statement may.
	cm.noStatementTimeout = true
	cn, err := c.connect(ctx, cm, dir == "up", 2)
	if err != nil {
		return err
	}
	defer cn.close()
	m, err := db.NewMigrator(cn.bun, cn.pool)
	if err != nil {
		return err
	}
	switch dir {
	case "up":
		applied, err := m.Up(ctx)
		if err != nil {
			return err
		}
		return c.printList(cm.json, "applied", applied)
	case "down":
		rolled, err := m.Down(ctx, *all)
		if err != nil {
			return err
		}
		return c.printList(cm.json, "rolled back", rolled)
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	if cm.json {
		return json.NewEncoder(c.stdout).Encode(st)
	}
	fmt.Fprintf(c.stdout, "river: version %d of %d\n", st.RiverVersion, st.RiverLatest)
	for _, a := range st.AppApplied {
		fmt.Fprintf(c.stdout, "app:   applied  %s\n", a)
	}
	for _, p := range st.AppPending {
		fmt.Fprintf(c.stdout, "app:   pending  %s\n", p)
	}
	if st.Current() {
		fmt.Fprintln(c.stdout, "current")
	}
	return nil
}

func (c *cli) printList(asJSON bool, verb string, items []string) error {
	if asJSON {
		if items == nil {
			items = []string{}
		}
		return json.NewEncoder(c.stdout).Encode(map[string][]string{verb: items})
	}
	if len(items) == 0 {
		fmt.Fprintf(c.stdout, "nothing %s\n", verb)
	}
	for _, it := range items {
		fmt.Fprintf(c.stdout, "%s %s\n", verb, it)
	}
	return nil
}
