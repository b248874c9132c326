package db_test

import (
	"context"
	"os"
	"testing"

	"asterion/db/dbtest"
)

// TestMigrationRemovesPlainTextWebhookSecrets: the migration that moved webhook secrets to
// sealed storage removes every plain-text secret and keeps sealed ones and the URLs.
func TestMigrationRemovesPlainTextWebhookSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	up, err := os.ReadFile("migrations/20261201000601_webhook_secret_sealed.tx.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]*string{"plain": ptr("s3cret"), "sealed": ptr("sealed:v1:AAAA"), "none": nil}
	for name, secret := range rows {
		if _, err := d.Bun.ExecContext(ctx, "INSERT INTO orgs (name, webhook_url, webhook_secret) VALUES (?, 'https://example.com/h', ?)",
			name, secret); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Bun.ExecContext(ctx, string(up)); err != nil {
		t.Fatalf("run the migration: %v", err)
	}
	for name, want := range map[string]*string{"plain": nil, "sealed": ptr("sealed:v1:AAAA"), "none": nil} {
		var url, secret *string
		if err := d.Bun.QueryRowContext(ctx, "SELECT webhook_url, webhook_secret FROM orgs WHERE name = ?", name).
			Scan(&url, &secret); err != nil {
			t.Fatal(err)
		}
		if url == nil || (want == nil) != (secret == nil) || (want != nil && *want != *secret) {
			t.Errorf("org %s after the migration: url %v secret %v, want secret %v", name, url, secret, want)
		}
	}
}
