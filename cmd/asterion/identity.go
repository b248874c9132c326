package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"asterion/identity"
)

func (c *cli) orgCreate(ctx context.Context, args []string) error {
	fs := newFlags("org create")
	cm := c.bindCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("usage: asterion org create NAME")
	}
	cn, err := c.connect(ctx, cm, false, 1)
	if err != nil {
		return err
	}
	defer cn.close()
	org, err := identity.NewService(cn.bun).CreateOrg(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cm.json {
		return json.NewEncoder(c.stdout).Encode(map[string]any{"id": org.ID, "name": org.Name})
	}
	fmt.Fprintf(c.stdout, "created org %s (id %d)\n", org.Name, org.ID)
	return nil
}

func (c *cli) userCreate(ctx context.Context, args []string) error {
	fs := newFlags("user create")
	cm := c.bindCommon(fs)
	org := fs.String("org", "", "org name")
	name := fs.String("name", "", "user name")
	role := fs.String("role", "", "member, operator or admin")
	pwStdin := fs.Bool("password-stdin", false, "read the password from the first line of stdin")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" || *name == "" || *role == "" || fs.NArg() > 0 {
		return usagef("usage: asterion user create --org ORG --name NAME --role member|operator|admin [--password-stdin]")
	}
	r, err := identity.ParseRole(*role)
	if err != nil {
		return usagef("%v", err)
	}
	password := ""
	if *pwStdin {
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
	u, err := identity.NewService(cn.bun).CreateUser(ctx, *org, *name, r, password)
	if err != nil {
		return err
	}
	if cm.json {
		return json.NewEncoder(c.stdout).Encode(map[string]any{"id": u.ID, "name": u.Name, "role": u.Role, "org": *org})
	}
	fmt.Fprintf(c.stdout, "created user %s (%s) in org %s\n", u.Name, u.Role, *org)
	return nil
}

// readPasswordLine reads a password from the first line of r.
func readPasswordLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("read password from stdin: nothing given")
	}
	return strings.TrimRight(line, "\r\n"), nil
}
