package handlers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/db"
	"asterion/identity"
)

type outputAnswer struct {
	JobID  string `json:"job_id"`
	State  string `json:"state"`
	Chunks []struct {
		Seq  int       `json:"seq"`
		Text string    `json:"text"`
		At   time.Time `json:"at"`
	} `json:"chunks"`
	Complete bool `json:"complete"`
}

func TestJobOutput(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveOutputConfig(t))
	u := f.user(t, "acme", "alice", identity.RoleMember)
	stranger := f.user(t, "globex", "gary", identity.RoleMember)
	sub := f.submit(t, u, "stream it #sim:tokens=30 #sim:latency=300ms")
	j := f.waitJob(t, u, sub.JobID, "succeeded")
	path := "/sa-core/v1/jobs/" + sub.JobID + "/output"

	r := f.do(t, "GET", path, u.Tok, nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("output: %s", r)
	}
	all := mustDecode[outputAnswer](t, r.Body)
	if !all.Complete || all.State != "succeeded" || len(all.Chunks) < 2 {
		t.Fatalf("output of a succeeded job: complete %v state %s, %d chunks", all.Complete, all.State, len(all.Chunks))
	}
	var text strings.Builder
	for i, c := range all.Chunks {
		if c.Seq != i+1 || c.At.IsZero() {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		text.WriteString(c.Text)
	}
	var resp db.Entity
	if err := f.DB.Bun.NewSelect().Model(&resp).Where("id = ?", *j.ResponseID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if text.String() != resp.Body {
		t.Errorf("chunks make %q, the response is %q", text.String(), resp.Body)
	}

	rest := mustDecode[outputAnswer](t, f.do(t, "GET", path+"?after=1", u.Tok, nil).Body)
	if len(rest.Chunks) != len(all.Chunks)-1 || rest.Chunks[0].Seq != 2 || !rest.Complete {
		t.Errorf("after=1: %d chunks from %d, complete %v", len(rest.Chunks), rest.Chunks[0].Seq, rest.Complete)
	}
	if end := mustDecode[outputAnswer](t, f.do(t, "GET", path+"?after=100000", u.Tok, nil).Body); len(end.Chunks) != 0 || !end.Complete {
		t.Errorf("after the last chunk: %+v", end)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		if r := f.do(t, "GET", path+"?after="+bad, u.Tok, nil); r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("after=%s: %s", bad, r)
		}
	}
	if r := f.do(t, "GET", path, stranger.Tok, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("another org's job: %s", r)
	}
}
