package batch

import (
	"context"
	"database/sql"
	"testing"

	"asterion/jobs/jobstest"
)

// TestALineTheDatabaseRefusesFailsAlone: a line whose rows the database refuses (here a
// trigger of the test's own refuses one prompt's text, standing in for any cause no rule
// foresaw) becomes an error line of its own, and every other line of its chunk still becomes
// a job in the same step; a custom_id PostgreSQL cannot store is refused by name, not stored
// altered.
func TestALineTheDatabaseRefusesFailsAlone(t *testing.T) {
	e := jobstest.NewEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	b := textBatches(t, e)
	if _, err := e.D.Bun.ExecContext(ctx, `CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN IF NEW.body = 'poison' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_poison BEFORE INSERT ON sa_entity FOR EACH ROW EXECUTE FUNCTION refuse_poison()`); err != nil {
		t.Fatal(err)
	}
	content := `{"custom_id":"c1","method":"POST","url":"/v1/text","body":{"text":"line one"}}
{"custom_id":"c2","method":"POST","url":"/v1/text","body":{"text":"poison"}}
{"custom_id":"c\u00003","method":"POST","url":"/v1/text","body":{"text":"line three"}}
{"custom_id":"c4","method":"POST","url":"/v1/text","body":{"text":"line four"}}
{"custom_id":"c5","method":"POST","url":"/v1/text","body":{"text":"line five"}}
`
	f, err := b.Upload(ctx, e.V, form(t, []byte(content)))
	if err != nil {
		t.Fatal(err)
	}
	bt, err := b.Create(ctx, CreateRequest{Viewer: e.V, InputFileID: f.ID, Endpoint: "/v1/text", CompletionWindow: Window})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"validate", "expand"} {
		if more, err := b.step(ctx, bt.ID); err != nil || !more {
			t.Fatalf("%s step: more %v, %v", step, more, err)
		}
	}
	type row struct {
		customID  sql.NullString
		job       bool
		errorCode sql.NullString
		body      sql.NullString
	}
	rows, err := e.D.Bun.QueryContext(ctx, `SELECT r.custom_id, r.job_id IS NOT NULL, r.error_code, p.body
		FROM sa_batch_request r LEFT JOIN sa_job j ON j.id = r.job_id LEFT JOIN sa_entity p ON p.id = j.prompt_id
		WHERE r.batch_id = ? ORDER BY r.line_no`, bt.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.customID, &r.job, &r.errorCode, &r.body); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	str := func(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
	want := []row{
		{customID: str("c1"), job: true, body: str("line one")},
		{customID: str("c2"), errorCode: str(CodeServerError)},
		{errorCode: str(CodeInvalidValue)},
		{customID: str("c4"), job: true, body: str("line four")},
		{customID: str("c5"), job: true, body: str("line five")},
	}
	if len(got) != len(want) {
		t.Fatalf("lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
	var jobsN, prompts int
	if err := e.D.Bun.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM sa_job), (SELECT count(*) FROM sa_entity WHERE kind = 'prompt')`).
		Scan(&jobsN, &prompts); err != nil || jobsN != 3 || prompts != 3 {
		t.Errorf("%d jobs and %d prompts (%v), want 3 of each: the refused line left nothing behind", jobsN, prompts, err)
	}
}
