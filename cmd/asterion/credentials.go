package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"asterion/identity"
)

// The credential lifecycle commands (docs/cli.md; each takes effect on the next request of a
// running server): tokens listed, revoked and created with an expiry; users disabled, enabled and
// given a new password; sessions ended.

// parseTTL reads a lifetime such as 30d, 12h or 90m.
func parseTTL(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		if err == nil && (n < 1 || n > 3650) {
			err = fmt.Errorf("out of range")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 || d > identity.MaxTokenTTL {
		return 0, usagef("--expires: want a lifetime like 30d, 12h or 90m (at most 3650d), got %q", s)
	}
	return d, nil
}

// tokenCreate prints a new token alone on one line and nothing else on stdout.
func (c *cli) tokenCreate(ctx context.Context, args []string) error {
	fs := newFlags("token create")
	cm := c.bindCommon(fs)
	user := fs.String("user", "", "user name")
	expires := fs.String("expires", "", "lifetime such as 30d or 12h (default: no expiry)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *user == "" || fs.NArg() > 0 {
		return usagef("usage: asterion token create --user NAME [--expires 30d]")
	}
	var ttl time.Duration
	if *expires != "" {
		var err error
		if ttl, err = parseTTL(*expires); err != nil {
			return err
		}
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	tok, _, err := identity.NewService(cn.bun).CreateTokenExpiring(ctx, *user, ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, tok)
	return nil
}

// tokenJSON is one row of token list --json.
type tokenJSON struct {
	ID         int64      `json:"id"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	State      string     `json:"state"`
}

func tokenState(t identity.TokenInfo, now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case t.ExpiresAt != nil && !t.ExpiresAt.After(now):
		return "expired"
	}
	return "active"
}

// tokenList shows a user's tokens: never the token itself, only what identifies it.
func (c *cli) tokenList(ctx context.Context, args []string) error {
	fs := newFlags("token list")
	cm := c.bindCommon(fs)
	user := fs.String("user", "", "user name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *user == "" || fs.NArg() > 0 {
		return usagef("usage: asterion token list --user NAME")
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	toks, err := identity.NewService(cn.bun).ListTokens(ctx, *user)
	if err != nil {
		return err
	}
	now := time.Now()
	if cm.json {
		out := make([]tokenJSON, len(toks))
		for i, t := range toks {
			out[i] = tokenJSON{ID: t.ID, Prefix: t.Prefix, CreatedAt: t.CreatedAt.UTC(), LastUsedAt: utcPtr(t.LastUsedAt),
				ExpiresAt: utcPtr(t.ExpiresAt), RevokedAt: utcPtr(t.RevokedAt), State: tokenState(t, now)}
		}
		return json.NewEncoder(c.stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tCREATED\tLAST USED\tEXPIRES\tSTATE")
	for _, t := range toks {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Prefix, t.CreatedAt.UTC().Format(time.RFC3339),
			timeOr(t.LastUsedAt, "never"), timeOr(t.ExpiresAt, "never"), tokenState(t, now))
	}
	return tw.Flush()
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func timeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// tokenRevoke makes a token, named by its id from token list, unusable at once.
func (c *cli) tokenRevoke(ctx context.Context, args []string) error {
	fs := newFlags("token revoke")
	cm := c.bindCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("usage: asterion token revoke ID")
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id < 1 {
		return usagef("token revoke: ID must be a token id from asterion token list, got %q", fs.Arg(0))
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	changed, err := identity.NewService(cn.bun).RevokeTokenID(ctx, id)
	if err != nil {
		return err
	}
	if cm.json {
		return json.NewEncoder(c.stdout).Encode(map[string]any{"id": id, "revoked": true, "already_revoked": !changed})
	}
	if !changed {
		fmt.Fprintf(c.stdout, "token %d was already revoked\n", id)
		return nil
	}
	fmt.Fprintf(c.stdout, "revoked token %d\n", id)
	return nil
}

// userCommand runs disable, enable, set-password: each names one user.
func (c *cli) userCommand(ctx context.Context, verb string, args []string) error {
	fs := newFlags("user " + verb)
	cm := c.bindCommon(fs)
	pwStdin := false
	if verb == "set-password" {
		fs.BoolVar(&pwStdin, "password-stdin", false, "read the new password from the first line of stdin")
	}
	// The name may come before or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		name = ""
	}
	if name == "" || (verb == "set-password" && !pwStdin) {
		if verb == "set-password" {
			return usagef("usage: asterion user set-password NAME --password-stdin")
		}
		return usagef("usage: asterion user %s NAME", verb)
	}
	password := ""
	if pwStdin {
		var err error
		if password, err = readPasswordLine(c.stdin); err != nil {
			return err
		}
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	ids := identity.NewService(cn.bun)
	var ended int
	switch verb {
	case "disable":
		ended, err = ids.DisableUser(ctx, name)
	case "enable":
		err = ids.EnableUser(ctx, name)
	case "set-password":
		ended, err = ids.SetPassword(ctx, name, password)
	}
	if err != nil {
		return err
	}
	if cm.json {
		return json.NewEncoder(c.stdout).Encode(map[string]any{"user": name, "done": verb, "sessions_ended": ended})
	}
	switch verb {
	case "disable":
		fmt.Fprintf(c.stdout, "disabled user %s (%d sessions ended)\n", name, ended)
	case "enable":
		fmt.Fprintf(c.stdout, "enabled user %s\n", name)
	case "set-password":
		fmt.Fprintf(c.stdout, "set the password of user %s (%d sessions ended)\n", name, ended)
	}
	return nil
}

// sessionRevoke signs a user out of every browser.
func (c *cli) sessionRevoke(ctx context.Context, args []string) error {
	fs := newFlags("session revoke")
	cm := c.bindCommon(fs)
	user := fs.String("user", "", "user name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *user == "" || fs.NArg() > 0 {
		return usagef("usage: asterion session revoke --user NAME")
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	ended, err := identity.NewService(cn.bun).RevokeSessions(ctx, *user)
	if err != nil {
		return err
	}
	if cm.json {
		return json.NewEncoder(c.stdout).Encode(map[string]any{"user": *user, "sessions_ended": ended})
	}
	fmt.Fprintf(c.stdout, "ended %d sessions of user %s\n", ended, *user)
	return nil
}
