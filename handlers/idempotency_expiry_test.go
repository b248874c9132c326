package handlers

import (
	"context"
	"testing"
	"time"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/maintenance"
)

// TestIdempotencyKeyExpiry: a key is kept 24 hours; an older key, or one whose job was archived,
// is expired, and a submit with it (the same body or another) is accepted as a new submission
// instead of a replay, a 409 or a 500. The prune job's purge deletes expired keys only.
func TestIdempotencyKeyExpiry(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "idem-org", "idem-user", identity.RoleMember)
	ctx := context.Background()
	const path = "/sa-core/v1/prompt"
	body := map[string]any{"prompt": "kept a day"}

	// Archived: the key's job moved to sa_job_archive.
	first := checkAccepted(t, f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "archived-key"))
	f.waitJob(t, u, first.JobID, "succeeded")
	if n, err := maintenance.ArchiveOldJobs(ctx, f.Jobs.DB(), time.Now().Add(time.Hour), 100); err != nil || n == 0 {
		t.Fatalf("archive: %d %v", n, err)
	}
	again := checkAccepted(t, f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "archived-key"))
	if again.JobID == first.JobID || again.PromptID == first.PromptID {
		t.Errorf("a key whose job was archived replayed it: %+v", again)
	}
	// The key now belongs to the new submission, and replays it.
	if replay := checkAccepted(t, f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "archived-key")); replay.JobID != again.JobID {
		t.Errorf("after the takeover the key replays job %s, want %s", replay.JobID, again.JobID)
	}

	// Older than 24 hours: expired whatever the body.
	old := checkAccepted(t, f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "old-key"))
	fresh := checkAccepted(t, f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "fresh-key"))
	if _, err := f.DB.Bun.ExecContext(ctx, "UPDATE sa_idempotency SET created_at = now() - interval '24 hours 1 minute' WHERE key = 'old-key'"); err != nil {
		t.Fatal(err)
	}
	if within := checkAccepted(t, f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "fresh-key")); within.JobID != fresh.JobID {
		t.Errorf("a key within 24 hours did not replay: job %s, want %s", within.JobID, fresh.JobID)
	}
	other := checkAccepted(t, f.do(t, "POST", path, u.Tok, map[string]any{"prompt": "another body"}, "Idempotency-Key", "old-key"))
	if other.JobID == old.JobID {
		t.Errorf("a key older than 24 hours replayed its job")
	}

	// The purge deletes what is older than 24 hours and nothing else.
	if _, err := f.DB.Bun.ExecContext(ctx, "UPDATE sa_idempotency SET created_at = now() - interval '25 hours' WHERE key = 'old-key'"); err != nil {
		t.Fatal(err)
	}
	n, err := maintenance.PurgeIdempotencyKeys(ctx, f.Jobs.DB(), jobs.IdempotencyKeyTTL)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d %v, want 1", n, err)
	}
	var left int
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_idempotency WHERE user_id = ?", u.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 2 {
		t.Errorf("%d keys left after the purge, want 2 (archived-key, fresh-key)", left)
	}
}
