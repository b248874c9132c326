package reliability

// The guarantees every scenario checks afterwards by SQL: no accepted prompt lost, and exactly
// one outcome per job.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun"
)

// terminalStates is the SQL list of the terminal job states.
const terminalStates = "('succeeded','failed','cancelled','superseded')"

// acceptedSet collects the handles of 202 answers from several goroutines.
type acceptedSet struct {
	mu    sync.Mutex
	items []submitResult
}

func (s *acceptedSet) add(r submitResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, r)
}

func (s *acceptedSet) all() []submitResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]submitResult(nil), s.items...)
}

// checkAcceptedJobs proves that no accepted prompt was lost: every (prompt_id, job_id) of a 202
// exists, the job belongs to that prompt, and it is the prompt's only job.
func checkAcceptedJobs(t *testing.T, db *bun.DB, accepted []submitResult) {
	t.Helper()
	ctx := context.Background()
	missing, wrong := 0, 0
	var examples []string
	for _, a := range accepted {
		var promptID string
		err := db.QueryRowContext(ctx, "SELECT prompt_id::text FROM sa_job WHERE id = ?", a.JobID).Scan(&promptID)
		switch {
		case err != nil:
			missing++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("job %s of prompt %s: %v", a.JobID, a.PromptID, err))
			}
		case promptID != a.PromptID:
			wrong++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("job %s belongs to prompt %s, the 202 said %s", a.JobID, promptID, a.PromptID))
			}
		}
	}
	if missing+wrong > 0 {
		t.Errorf("%d accepted jobs are missing and %d belong to another prompt: %s", missing, wrong, strings.Join(examples, "; "))
	}
	if n := mustInt(t, db, "SELECT count(*) FROM (SELECT prompt_id FROM sa_job GROUP BY prompt_id HAVING count(*) <> 1) x"); n != 0 {
		t.Errorf("%d prompts have other than exactly one job (nothing here retries by supersede)", n)
	}
}

// checkExactlyOnce proves the at-most-once and exactly-one-outcome rules over every job of the
// database: each job is terminal; a succeeded job has exactly one response entity whose
// parent is the prompt, one flows-to edge, one ledger row and one job.succeeded audit row, and
// response_id points at that response; a job that did not succeed has none of them; and the
// change feed shows each job entering a terminal state exactly once.
func checkExactlyOnce(t *testing.T, db *bun.DB) {
	t.Helper()
	type check struct {
		what  string
		query string
	}
	checks := []check{
		{"jobs not in a terminal state", "SELECT count(*) FROM sa_job WHERE state NOT IN " + terminalStates},
		{"succeeded jobs without exactly one response entity (parent_id = prompt)", `
SELECT count(*) FROM sa_job j
 WHERE j.state = 'succeeded'
   AND (SELECT count(*) FROM sa_entity e WHERE e.kind = 'response' AND e.parent_id = j.prompt_id) <> 1`},
		{"succeeded jobs whose response_id is not their prompt's response", `
SELECT count(*) FROM sa_job j
 WHERE j.state = 'succeeded'
   AND NOT EXISTS (SELECT 1 FROM sa_entity e WHERE e.id = j.response_id AND e.kind = 'response' AND e.parent_id = j.prompt_id)`},
		{"jobs that did not succeed but have a response entity", `
SELECT count(*) FROM sa_job j
 WHERE j.state <> 'succeeded'
   AND EXISTS (SELECT 1 FROM sa_entity e WHERE e.kind = 'response' AND e.parent_id = j.prompt_id)`},
		{"jobs with more than one ledger row", "SELECT count(*) FROM (SELECT job_id FROM sa_ledger GROUP BY job_id HAVING count(*) > 1) x"},
		{"succeeded jobs without exactly one ledger row", `
SELECT count(*) FROM sa_job j WHERE j.state = 'succeeded' AND (SELECT count(*) FROM sa_ledger l WHERE l.job_id = j.id) <> 1`},
		{"jobs that did not succeed but have a ledger row", `
SELECT count(*) FROM sa_job j WHERE j.state <> 'succeeded' AND EXISTS (SELECT 1 FROM sa_ledger l WHERE l.job_id = j.id)`},
		{"jobs with more than one job.succeeded audit row", `
SELECT count(*) FROM (SELECT subject_id FROM sa_audit WHERE action = 'job.succeeded' GROUP BY subject_id HAVING count(*) > 1) x`},
		{"succeeded jobs without a job.succeeded audit row", `
SELECT count(*) FROM sa_job j
  LEFT JOIN (SELECT DISTINCT subject_id FROM sa_audit WHERE action = 'job.succeeded') a ON a.subject_id = j.id::text
 WHERE j.state = 'succeeded' AND a.subject_id IS NULL`},
		{"succeeded jobs without exactly one flows-to edge from their prompt", `
SELECT count(*) FROM sa_job j WHERE j.state = 'succeeded'
   AND (SELECT count(*) FROM sa_edge g WHERE g.kind = 'flows-to' AND g.from_id = j.prompt_id) <> 1`},
		{"jobs whose change feed shows other than one entry into a terminal state", `
SELECT count(*) FROM sa_job j
  LEFT JOIN (SELECT job_id, count(*) FILTER (WHERE payload->>'state' IN ('succeeded','failed','cancelled')) AS n
               FROM sa_event WHERE topic = 'job' GROUP BY job_id) e ON e.job_id = j.id
 WHERE coalesce(e.n, 0) <> 1`},
		{"jobs whose last change-feed state is not their state", `
SELECT count(*) FROM sa_job j
  LEFT JOIN (SELECT DISTINCT ON (job_id) job_id, payload->>'state' AS state
               FROM sa_event WHERE topic = 'job' ORDER BY job_id, id DESC) e ON e.job_id = j.id
 WHERE e.state IS DISTINCT FROM j.state`},
	}
	for _, c := range checks {
		if n := mustInt(t, db, c.query); n != 0 {
			t.Errorf("%d %s", n, c.what)
		}
	}
}
