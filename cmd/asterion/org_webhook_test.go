package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/delivery"
	"asterion/secretbox"
)

// runBinaryIn is runBinary with the working directory dir (where .data/secret.key lives).
func runBinaryIn(t *testing.T, dir string, env map[string]string, stdin string, args ...string) binResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, asterionBin(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "ASTERION_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := binResult{stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("asterion %s did not finish within 90 s; stderr:\n%s", strings.Join(args, " "), r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run asterion: %v", err)
	}
	return r
}

// orgWebhook reads the org's stored webhook columns.
func orgWebhook(t *testing.T, d *dbtest.DB, name string) (id int64, hookURL, secret *string) {
	t.Helper()
	if err := d.Bun.QueryRowContext(context.Background(), "SELECT id, webhook_url, webhook_secret FROM orgs WHERE name = ?", name).
		Scan(&id, &hookURL, &secret); err != nil {
		t.Fatalf("read org %s: %v", name, err)
	}
	return id, hookURL, secret
}

// TestSetWebhookGeneratesSealedSecretWithSharedKeyFile: set-webhook prints a generated whsec_
// secret once, stores it sealed (not in plain text) with a key it generates into
// .data/secret.key (0600) under the working directory, and a second run there reuses that key.
func TestSetWebhookGeneratesSealedSecretWithSharedKeyFile(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	dir := t.TempDir()
	env := map[string]string{"DATABASE_URL": d.URL.String()}
	if r := runBinaryIn(t, dir, env, "", "org", "create", "acme"); r.code != 0 {
		t.Fatalf("org create: %s", r.stderr)
	}
	r := runBinaryIn(t, dir, env, "", "org", "set-webhook", "acme", "--url", "https://93.184.216.34/hook")
	if r.code != 0 {
		t.Fatalf("set-webhook: exit %d %s", r.code, r.stderr)
	}
	var secret string
	for _, l := range lines(r.stdout) {
		if strings.HasPrefix(l, "whsec_") {
			secret = l
		}
	}
	if _, err := delivery.ParseSecret(secret); err != nil {
		t.Fatalf("no valid generated secret printed (%v):\n%s", err, r.stdout)
	}
	keyPath := filepath.Join(dir, ".data", "secret.key")
	st, err := os.Stat(keyPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: %v %v, want mode 0600", keyPath, st, err)
	}
	keyText, _ := os.ReadFile(keyPath)
	key, err := secretbox.ParseKey(string(keyText))
	if err != nil {
		t.Fatalf("key file content: %v", err)
	}
	id, hookURL, stored := orgWebhook(t, d, "acme")
	if hookURL == nil || *hookURL != "https://93.184.216.34/hook" || stored == nil {
		t.Fatalf("stored webhook %v %v", hookURL, stored)
	}
	if strings.Contains(*stored, secret) || strings.Contains(*stored, strings.TrimPrefix(secret, "whsec_")) || !secretbox.IsSealed(*stored) {
		t.Fatalf("the secret is stored in plain text: %q", *stored)
	}
	if got, err := delivery.OpenSecret(key, id, *stored); err != nil || got != secret {
		t.Fatalf("the stored secret opens to %q, %v; want the printed one", got, err)
	}

	// A second run in the same directory, with its own secret from stdin: the same key.
	mine, _ := delivery.NewSecret()
	r = runBinaryIn(t, dir, env, mine+"\n", "org", "set-webhook", "acme", "--url", "https://93.184.216.34/other", "--secret-stdin")
	if r.code != 0 || strings.Contains(r.stdout, mine) || strings.Contains(r.stdout, "whsec_") {
		t.Fatalf("set-webhook --secret-stdin: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if again, _ := os.ReadFile(keyPath); string(again) != string(keyText) {
		t.Fatal("the second run replaced the key file")
	}
	_, _, stored = orgWebhook(t, d, "acme")
	if got, err := delivery.OpenSecret(key, id, *stored); err != nil || got != mine {
		t.Fatalf("the second secret opens to %q, %v; want the one given", got, err)
	}

	// A malformed secret from stdin is refused, and nothing changes.
	r = runBinaryIn(t, dir, env, "s3cret\n", "org", "set-webhook", "acme", "--url", "https://93.184.216.34/third", "--secret-stdin")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "whsec_") {
		t.Fatalf("malformed secret: %q", line)
	}
	if _, u, _ := orgWebhook(t, d, "acme"); *u != "https://93.184.216.34/other" {
		t.Fatalf("the refused run changed the URL to %s", *u)
	}

	// --json carries the generated secret; a configured key is used instead of the file.
	other := t.TempDir()
	_, keyB64, _ := secretbox.NewKey()
	envKey := map[string]string{"DATABASE_URL": d.URL.String(), "ASTERION_SECRET_KEY": keyB64}
	r = runBinaryIn(t, other, envKey, "", "org", "set-webhook", "--json", "acme", "--url", "https://93.184.216.34/json")
	var out struct {
		WebhookURL    string `json:"webhook_url"`
		WebhookSecret string `json:"webhook_secret"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.WebhookURL != "https://93.184.216.34/json" {
		t.Fatalf("--json: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(other, ".data")); !os.IsNotExist(err) {
		t.Fatalf("a key file was made although ASTERION_SECRET_KEY is set: %v", err)
	}
	envK, _ := secretbox.ParseKey(keyB64)
	_, _, stored = orgWebhook(t, d, "acme")
	if got, err := delivery.OpenSecret(envK, id, *stored); err != nil || got != out.WebhookSecret {
		t.Fatalf("with ASTERION_SECRET_KEY the secret opens to %q, %v", got, err)
	}
	r = runBinaryIn(t, other, map[string]string{"DATABASE_URL": d.URL.String(), "ASTERION_SECRET_KEY": "short"},
		"", "org", "set-webhook", "acme", "--url", "https://93.184.216.34/x")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "ASTERION_SECRET_KEY") {
		t.Fatalf("malformed key: %q", line)
	}
}

// TestSetWebhookRefusesPrivateTargets: a URL that is, or resolves to, a loopback, private or
// link-local address is refused with one line and nothing stored, unless
// ASTERION_WEBHOOK_ALLOW_PRIVATE=true.
func TestSetWebhookRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	dir := t.TempDir()
	env := map[string]string{"DATABASE_URL": d.URL.String()}
	if r := runBinaryIn(t, dir, env, "", "org", "create", "acme"); r.code != 0 {
		t.Fatalf("org create: %s", r.stderr)
	}
	for _, u := range []string{"http://localhost:8080/hook", "http://127.0.0.1/hook", "http://10.1.2.3/hook",
		"http://169.254.169.254/latest/meta-data", "http://[::1]:9000/", "http://[fd00::1]/", "http://0.0.0.0/"} {
		r := runBinaryIn(t, dir, env, "", "org", "set-webhook", "acme", "--url", u)
		if line := wantFailure(t, r, 1); !strings.Contains(line, "not a public address") || !strings.Contains(line, "ASTERION_WEBHOOK_ALLOW_PRIVATE") {
			t.Errorf("%s: %q", u, line)
		}
	}
	if _, u, s := orgWebhook(t, d, "acme"); u != nil || s != nil {
		t.Fatalf("a refused URL was stored: %v %v", u, s)
	}
	if _, err := os.Stat(filepath.Join(dir, ".data")); !os.IsNotExist(err) {
		t.Fatalf("a refused run made the key file: %v", err)
	}
	r := runBinaryIn(t, dir, map[string]string{"DATABASE_URL": d.URL.String(), "ASTERION_WEBHOOK_ALLOW_PRIVATE": "maybe"},
		"", "org", "set-webhook", "acme", "--url", "http://localhost:8080/hook")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "ASTERION_WEBHOOK_ALLOW_PRIVATE") {
		t.Fatalf("bad switch: %q", line)
	}
	r = runBinaryIn(t, dir, map[string]string{"DATABASE_URL": d.URL.String(), "ASTERION_WEBHOOK_ALLOW_PRIVATE": "true"},
		"", "org", "set-webhook", "acme", "--url", "http://localhost:8080/hook")
	if r.code != 0 {
		t.Fatalf("allowed private target: exit %d %s", r.code, r.stderr)
	}
	if _, u, _ := orgWebhook(t, d, "acme"); u == nil || *u != "http://localhost:8080/hook" {
		t.Fatalf("stored URL %v", u)
	}
}

// TestWebhookDeliveredSignedByWorkerSharingTheKeyFile: set-webhook and a run-worker started in
// one directory share .data/secret.key, so the worker opens the secret the CLI sealed and
// the receiver verifies the delivery with the printed secret, as the specification says.
func TestWebhookDeliveredSignedByWorkerSharingTheKeyFile(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	dir := t.TempDir()
	svc, viewer := submitter(t, d)
	type got struct {
		header http.Header
		body   []byte
	}
	arrived := make(chan got, 8)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		arrived <- got{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	env := map[string]string{"DATABASE_URL": d.URL.String(), "ASTERION_WEBHOOK_ALLOW_PRIVATE": "true"}
	r := runBinaryIn(t, dir, env, "", "org", "set-webhook", "--json", "workers", "--url", hook.URL+"/in")
	var out struct {
		WebhookSecret string `json:"webhook_secret"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("set-webhook: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	cmd := exec.Command(asterionBin(t), "run-worker")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "ASTERION_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+d.URL.String(), "ASTERION_WEBHOOK_ALLOW_PRIVATE=true",
		"ASTERION_SIM_LATENCY=0-0", "ASTERION_LOG_LEVEL=warn")
	w := &workerProc{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start run-worker: %v", err)
	}
	t.Cleanup(w.stop)

	sub, err := svc.Submit(context.Background(), jobs.SubmitRequest{Viewer: viewer, Prompt: "deliver to the hook"})
	if err != nil {
		t.Fatal(err)
	}
	var g got
	select {
	case g = <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("no delivery within 60 s; worker stderr:\n%s", w.stderr)
	}
	// Verify as the specification says, with the printed secret.
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(out.WebhookSecret, "whsec_"))
	if err != nil || !strings.HasPrefix(out.WebhookSecret, "whsec_") {
		t.Fatalf("secret %q", out.WebhookSecret)
	}
	id, ts := g.header.Get("webhook-id"), g.header.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute || id == "" {
		t.Fatalf("webhook-id %q webhook-timestamp %q", id, ts)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(g.body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(g.header.Get("webhook-signature")), []byte(want)) {
		t.Fatalf("webhook-signature %q does not verify", g.header.Get("webhook-signature"))
	}
	var doc map[string]any
	if err := json.Unmarshal(g.body, &doc); err != nil || doc["job_id"] != sub.JobID.String() || doc["delivery_id"] != id {
		t.Fatalf("body %s for job %s", g.body, sub.JobID)
	}
	if _, err := os.Stat(filepath.Join(dir, ".data", "secret.key")); err != nil {
		t.Fatalf("key file: %v", err)
	}
}
