package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

const orgSetWebhookUsage = "usage: asterion org set-webhook NAME (--url URL --secret-stdin | --clear)"

// orgSetWebhook is `asterion org set-webhook NAME --url URL --secret-stdin`: succeeded prompt
// responses of the org are then delivered to URL, signed with the secret read from the first
// line of stdin (X-Asterion-Signature: sha256=<hex HMAC-SHA256(secret, body)>). --clear
// removes the webhook. The secret is never printed.
func (c *cli) orgSetWebhook(ctx context.Context, args []string) error {
	fs := newFlags("org set-webhook")
	cm := c.bindCommon(fs)
	rawURL := fs.String("url", "", "the http(s) URL deliveries are POSTed to")
	secretStdin := fs.Bool("secret-stdin", false, "read the signing secret from the first line of stdin")
	clearHook := fs.Bool("clear", false, "remove the org's webhook")
	// NAME may come before or after the flags.
	var names []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(names) != 1 || (*clearHook == (*rawURL != "")) || (*clearHook && *secretStdin) || (!*clearHook && !*secretStdin) {
		return usagef(orgSetWebhookUsage)
	}
	var hookURL, secret *string
	if !*clearHook {
		u, err := url.Parse(strings.TrimSpace(*rawURL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--url: want an absolute http or https URL, got %q", *rawURL)
		}
		s := u.String()
		hookURL = &s
		line, err := bufio.NewReader(c.stdin).ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if err != nil {
				return errors.New("read the webhook secret from stdin: nothing given")
			}
			return errors.New("the webhook secret must not be empty")
		}
		secret = &line
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	res, err := cn.bun.ExecContext(ctx, "UPDATE orgs SET webhook_url = ?, webhook_secret = ? WHERE name = ?",
		hookURL, secret, names[0])
	if err != nil {
		return fmt.Errorf("set the webhook of org %s: %w", names[0], err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("no org named %q", names[0])
	}
	if cm.json {
		return writeJSON(c, map[string]any{"org": names[0], "webhook_url": hookURL})
	}
	if hookURL == nil {
		fmt.Fprintf(c.stdout, "removed the webhook of org %s\n", names[0])
		return nil
	}
	fmt.Fprintf(c.stdout, "org %s delivers succeeded responses to %s\n", names[0], *hookURL)
	return nil
}
