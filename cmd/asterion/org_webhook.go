package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"asterion/jobs/delivery"
)

const orgSetWebhookUsage = "usage: asterion org set-webhook NAME (--url URL [--secret-stdin] | --clear)"

// orgSetWebhook is `asterion org set-webhook NAME --url URL [--secret-stdin]`: succeeded prompt
// responses of the org are then delivered to URL, signed as Standard Webhooks says with a
// whsec_ secret. Without --secret-stdin the secret is generated and printed once; with it, it
// is the first line of stdin and is never printed. The secret is stored sealed with the
// server's secret key. A URL whose host resolves to a loopback, private or link-local address
// is refused unless ASTERION_WEBHOOK_ALLOW_PRIVATE=true. --clear removes the webhook.
func (c *cli) orgSetWebhook(ctx context.Context, args []string) error {
	fs := newFlags("org set-webhook")
	cm := c.bindCommon(fs)
	rawURL := fs.String("url", "", "the http(s) URL deliveries are POSTed to")
	secretStdin := fs.Bool("secret-stdin", false, "read the whsec_ signing secret from the first line of stdin instead of generating one")
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
	if len(names) != 1 || (*clearHook == (*rawURL != "")) || (*clearHook && *secretStdin) {
		return usagef(orgSetWebhookUsage)
	}
	var hookURL, secret *string
	generated := false
	if !*clearHook {
		u, err := url.Parse(strings.TrimSpace(*rawURL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return usagef("--url: want an absolute http or https URL, got %q", *rawURL)
		}
		s := u.String()
		hookURL = &s
		allowPrivate, err := c.webhookAllowPrivate()
		if err != nil {
			return err
		}
		if !allowPrivate {
			if err := delivery.CheckTarget(ctx, s); err != nil {
				var pe *delivery.PrivateTargetError
				if errors.As(err, &pe) {
					return fmt.Errorf("--url: %v; webhooks go to public addresses only (set %s=true to allow it)", pe, allowPrivateEnv)
				}
				return fmt.Errorf("--url: %w", err)
			}
		}
		sec, err := c.webhookSecret(*secretStdin)
		if err != nil {
			return err
		}
		secret, generated = &sec, !*secretStdin
	}
	keys, err := c.secretKeys()
	if err != nil {
		return err
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	var orgID int64
	err = cn.bun.NewSelect().Table("orgs").Column("id").Where("name = ?", names[0]).Scan(ctx, &orgID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("no org named %q", names[0])
	}
	if err != nil {
		return fmt.Errorf("find org %s: %w", names[0], err)
	}
	var stored *string
	if secret != nil {
		k, err := keys.Key()
		if err != nil {
			return fmt.Errorf("load the server's secret key: %w", err)
		}
		sealed, err := delivery.SealSecret(k, orgID, *secret)
		if err != nil {
			return err
		}
		stored = &sealed
	}
	if _, err := cn.bun.ExecContext(ctx, setOrgWebhookSQL, hookURL, stored, orgID); err != nil {
		return fmt.Errorf("set the webhook of org %s: %w", names[0], err)
	}
	if cm.json {
		out := map[string]any{"org": names[0], "webhook_url": hookURL}
		if generated {
			out["webhook_secret"] = *secret
		}
		return writeJSON(c, out)
	}
	if hookURL == nil {
		fmt.Fprintf(c.stdout, "removed the webhook of org %s\n", names[0])
		return nil
	}
	fmt.Fprintf(c.stdout, "org %s delivers succeeded responses to %s\n", names[0], *hookURL)
	if generated {
		fmt.Fprintf(c.stdout, "webhook secret (shown only now; give it to the receiver to verify the signatures):\n%s\n", *secret)
	}
	return nil
}

// webhookSecret generates a secret, or reads it from the first line of stdin and checks its
// form.
func (c *cli) webhookSecret(fromStdin bool) (string, error) {
	if !fromStdin {
		return delivery.NewSecret()
	}
	line, err := bufio.NewReader(c.stdin).ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "" {
		if err != nil {
			return "", errors.New("read the webhook secret from stdin: nothing given")
		}
		return "", errors.New("the webhook secret must not be empty")
	}
	if _, err := delivery.ParseSecret(line); err != nil {
		return "", fmt.Errorf("the webhook secret from stdin: %w", err)
	}
	return line, nil
}
