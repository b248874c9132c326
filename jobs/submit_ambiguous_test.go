package jobs

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
)

// TestAmbiguousGroupCommitWritesNothingTwice: a shared submit transaction whose COMMIT answer is
// lost (here it committed, and the hook stands for the lost answer) is not replayed as new jobs:
// every submit is answered accepted with the handle of the row that exists, and the database
// holds exactly one prompt and one job per submit. A group whose transaction really failed is
// written again, each submit alone, also once.
func TestAmbiguousGroupCommitWritesNothingTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		committed bool
	}{{"committed, answer lost", true}, {"not committed", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _, org, user := newInternalService(t, "ambiguous")
			ctx := context.Background()
			faults := 0
			cut := func() error {
				faults++
				if faults == 1 {
					return errors.New("connection lost at COMMIT")
				}
				return nil
			}
			if tc.committed {
				s.groupCommitFault = cut
			} else {
				s.groupFault = func(int) error { return cut() }
			}
			batch := waitingSubmits(t, ctx, s, Viewer{OrgID: org, UserID: user}, "ambiguous", 4)
			s.submits.Flush(ctx, batch)
			var ids []uuid.UUID
			for i, p := range batch {
				out := <-p.Done()
				if out.Err != nil {
					t.Fatalf("submit %d: %v", i, out.Err)
				}
				ids = append(ids, out.Res.JobID)
				var prompt uuid.UUID
				if err := s.db.QueryRowContext(ctx, "SELECT prompt_id FROM sa_job WHERE id = ?", out.Res.JobID).Scan(&prompt); err != nil || prompt != out.Res.PromptID {
					t.Errorf("submit %d answered job %s of prompt %s; the database has prompt %s (%v)", i, out.Res.JobID, out.Res.PromptID, prompt, err)
				}
			}
			if faults == 0 {
				t.Fatal("the fault never fired")
			}
			var jobs, prompts int
			if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sa_job").Scan(&jobs); err != nil {
				t.Fatal(err)
			}
			if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sa_entity WHERE kind = 'prompt'").Scan(&prompts); err != nil {
				t.Fatal(err)
			}
			if jobs != 4 || prompts != 4 {
				t.Errorf("%d jobs and %d prompts for 4 submits, want 4 of each", jobs, prompts)
			}
			if times := jobTimes(t, s, ids); len(times) != 4 {
				t.Errorf("%d of the answered jobs exist, want 4", len(times))
			}
		})
	}
}
