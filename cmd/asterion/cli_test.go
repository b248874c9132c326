package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"

	"asterion/db/dbtest"
	"asterion/identity"
)

func TestBadDatabaseURL(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"scheme only":     "postgres://",
		"garbage":         "postgres://%zz",
		"no database":     "postgres://postgres@127.0.0.1:5432",
		"bad port":        "postgres://postgres@127.0.0.1:99999999/x",
		"mysql":           "mysql://x",
		"empty":           "",
		"not a URL":       "host=127.0.0.1 user=postgres",
		"unknown sslmode": "postgres://postgres@127.0.0.1/x?sslmode=sometimes",
	}
	for name, u := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"migrate", "status"}} {
				r := runBinary(t, map[string]string{"DATABASE_URL": u}, "", args...)
				line := wantFailure(t, r, 1)
				if !strings.Contains(line, "database URL") {
					t.Errorf("%s: %q does not say what is wrong", args[0], line)
				}
				// A refusal before any connection: waiting for a server would end in "cannot
				// connect … after 30s" instead (and one stderr line leaves no room for the
				// retry notices of a wait).
				if strings.Contains(line, "cannot connect") {
					t.Errorf("%s: %q: it waited for a server instead of refusing the URL", args[0], line)
				}
			}
		})
	}
	// A password in a broken URL stays out of the message.
	r := runBinary(t, map[string]string{"DATABASE_URL": "postgres://bob:hunter2@db.example/%zz"}, "", "migrate", "status")
	if line := wantFailure(t, r, 1); strings.Contains(line, "hunter2") {
		t.Fatalf("the error shows the password: %s", line)
	}
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	r := runBinary(t, map[string]string{
		"DATABASE_URL":     "postgres://postgres@127.0.0.1:1/x?sslmode=disable",
		"ASTERION_DB_WAIT": "1s",
	}, "", "serve", "--addr", "127.0.0.1:0")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	noPanic(t, r.stderr)
	// One error line; anything else on stderr is a structured (JSON) retry notice.
	var errLines []string
	for _, l := range lines(r.stderr) {
		if strings.HasPrefix(l, "asterion: ") {
			errLines = append(errLines, l)
			continue
		}
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) != nil {
			t.Errorf("stderr line is neither the error nor a JSON log record: %q", l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "127.0.0.1:1") {
		t.Fatalf("want one error line naming 127.0.0.1:1, got:\n%s", r.stderr)
	}
	// The wait the server gave up after is the one ASTERION_DB_WAIT asked for (ignoring it
	// would say 30s); how long that took on this machine is not the test's business.
	if !strings.Contains(errLines[0], "after 1s") {
		t.Errorf("%q does not say it gave up after the 1s of ASTERION_DB_WAIT", errLines[0])
	}
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := runBinary(t, map[string]string{"DATABASE_URL": d.URL.String()}, "", "serve", "--addr", ln.Addr().String())
	line := wantFailure(t, r, 1)
	if !strings.Contains(line, "address already in use") || !strings.Contains(line, ln.Addr().String()) {
		t.Fatalf("error %q does not name the address and say it is in use", line)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/x"}
	for _, args := range [][]string{
		{"frobnicate"},
		{"serve", "--bogus"},
		{"serve", "extra-arg"},
		{"serve", "--addr", "no-port"},
		{"migrate", "sideways"},
		{"migrate", "up", "--nope"},
		{"org"},
		{"org", "create"},
		{"org", "delete", "x"},
		{"user", "create", "--org", "acme", "--name", "bob"},
		{"user", "create", "--org", "acme", "--name", "bob", "--role", "root"},
		{"token", "create"},
		{"token", "create", "--user"},
	} {
		r := runBinary(t, env, "", args...)
		if strings.Join(args, " ") == "serve --addr no-port" {
			// An invalid address is a configuration error, not a misuse of the command line.
			if r.code != 1 && r.code != 2 {
				t.Errorf("%v: exit %d, want 1 or 2", args, r.code)
				continue
			}
			if line := wantFailure(t, r, r.code); !strings.Contains(line, "no-port") {
				t.Errorf("%v: %q does not name the address", args, line)
			}
			continue
		}
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %q", args, r.code, r.stderr)
			continue
		}
		wantFailure(t, r, 2)
	}
	// No command at all prints the usage and exits 2.
	r := runBinary(t, env, "")
	if r.code != 2 || !strings.Contains(r.stderr, "usage: asterion") {
		t.Fatalf("no command: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runBinary(t, env, "", "help"); r.code != 0 || !strings.Contains(r.stdout, "token create") {
		t.Fatalf("help: exit %d stdout %q", r.code, r.stdout)
	}
}

var tokenRE = regexp.MustCompile(`^ast_[a-z2-7]{40,}$`)

func TestTokenCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	ids := identity.NewService(d.Bun)
	if _, _, err := ids.Bootstrap(ctx, "admin-password"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": d.URL.String()}
	r := runBinary(t, env, "", "token", "create", "--user", "admin")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.HasSuffix(r.stdout, "\n") || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("stdout is not exactly one line: %q", r.stdout)
	}
	tok := strings.TrimSuffix(r.stdout, "\n")
	if !tokenRE.MatchString(tok) {
		t.Fatalf("stdout %q is not a token", tok)
	}
	p, err := ids.AuthenticateToken(ctx, tok)
	if err != nil || p.UserName != "admin" || p.Role != identity.RoleAdmin {
		t.Fatalf("printed token authenticates as %+v, %v", p, err)
	}
	// A second token is another token.
	r2 := runBinary(t, env, "", "token", "create", "--user", "admin")
	if r2.code != 0 || strings.TrimSpace(r2.stdout) == tok {
		t.Fatalf("second token: exit %d %q", r2.code, r2.stdout)
	}

	r = runBinary(t, env, "", "token", "create", "--user", "nobody")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "nobody") {
		t.Fatalf("unknown user: %q", line)
	}
	if r.stdout != "" {
		t.Fatalf("a failed token create printed %q", r.stdout)
	}
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	u := dbtest.NewEmpty(t)
	env := map[string]string{"DATABASE_URL": u.String()}
	ok := func(args ...string) string {
		t.Helper()
		r := runBinary(t, env, "", args...)
		if r.code != 0 {
			t.Fatalf("asterion %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	current := func(status string) bool {
		ls := lines(status)
		return len(ls) > 0 && ls[len(ls)-1] == "current"
	}

	if out := ok("migrate", "status"); current(out) || !strings.Contains(out, "pending") {
		t.Fatalf("status of an empty database:\n%s", out)
	}
	out := ok("migrate", "up")
	if !strings.Contains(out, "applied river") || !strings.Contains(out, "applied app") {
		t.Fatalf("migrate up on an empty database:\n%s", out)
	}
	if out := ok("migrate", "status"); !current(out) || strings.Contains(out, "pending") {
		t.Fatalf("status after up:\n%s", out)
	}
	if out := ok("migrate", "up"); strings.TrimSpace(out) != "nothing applied" {
		t.Fatalf("second up:\n%s", out)
	}
	var st struct {
		AppApplied   []string `json:"app_applied"`
		AppPending   []string `json:"app_pending"`
		RiverVersion int      `json:"river_version"`
		RiverLatest  int      `json:"river_latest"`
	}
	if err := json.Unmarshal([]byte(ok("migrate", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.AppApplied) == 0 || len(st.AppPending) != 0 || st.RiverVersion == 0 || st.RiverVersion != st.RiverLatest {
		t.Fatalf("status --json after up: %+v", st)
	}

	out = ok("migrate", "down", "--all")
	if !strings.Contains(out, "rolled back app") || !strings.Contains(out, "rolled back river") {
		t.Fatalf("down --all:\n%s", out)
	}
	status := ok("migrate", "status")
	if current(status) || !strings.Contains(status, "river: version 0 of") {
		t.Fatalf("status after down --all:\n%s", status)
	}

	if out := ok("migrate", "up"); !strings.Contains(out, "applied river") || !strings.Contains(out, "applied app") {
		t.Fatalf("up after down --all:\n%s", out)
	}
	if out := ok("migrate", "status"); !current(out) {
		t.Fatalf("status after the second up:\n%s", out)
	}
}

func TestOrgAndUserCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": d.URL.String()}

	r := runBinary(t, env, "", "org", "create", "--json", "acme")
	var org struct {
		ID   int64
		Name string
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &org) != nil || org.Name != "acme" || org.ID == 0 {
		t.Fatalf("org create --json: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runBinary(t, env, "", "org", "create", "acme")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "acme") || !strings.Contains(line, "exists") {
		t.Fatalf("duplicate org: %q", line)
	}

	r = runBinary(t, env, "correct horse battery\n", "user", "create", "--org", "acme", "--name", "alice", "--role", "operator", "--password-stdin")
	if r.code != 0 || !strings.Contains(r.stdout, "alice") {
		t.Fatalf("user create: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	ids := identity.NewService(d.Bun)
	_, _, p, err := ids.Login(ctx, "alice", "correct horse battery")
	if err != nil || p.OrgName != "acme" || p.Role != identity.RoleOperator {
		t.Fatalf("alice signs in as %+v, %v", p, err)
	}

	r = runBinary(t, env, "another password\n", "user", "create", "--org", "acme", "--name", "alice", "--role", "member", "--password-stdin")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "alice") || !strings.Contains(line, "exists") {
		t.Fatalf("duplicate user: %q", line)
	}
	if _, _, _, err := ids.Login(ctx, "alice", "correct horse battery"); err != nil {
		t.Fatalf("the refused duplicate changed alice: %v", err)
	}

	// Without a password a user exists for tokens only.
	r = runBinary(t, env, "", "user", "create", "--org", "acme", "--name", "robot", "--role", "member")
	if r.code != 0 {
		t.Fatalf("user without password: exit %d %s", r.code, r.stderr)
	}
	if _, _, _, err := ids.Login(ctx, "robot", ""); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("password-less user signs in: %v", err)
	}

	for name, c := range map[string]struct {
		stdin string
		args  []string
	}{
		"unknown org":    {"pass-word-1\n", []string{"--org", "initech", "--name", "bob", "--role", "member", "--password-stdin"}},
		"short password": {"short\n", []string{"--org", "acme", "--name", "bob", "--role", "member", "--password-stdin"}},
		"empty stdin":    {"", []string{"--org", "acme", "--name", "bob", "--role", "member", "--password-stdin"}},
	} {
		r := runBinary(t, env, c.stdin, append([]string{"user", "create"}, c.args...)...)
		if r.code != 1 {
			t.Errorf("%s: exit %d, want 1; stderr %q", name, r.code, r.stderr)
			continue
		}
		wantFailure(t, r, 1)
	}
	if _, _, _, err := ids.Login(ctx, "bob", "pass-word-1"); err == nil {
		t.Fatal("a refused user create left a user behind")
	}
}
