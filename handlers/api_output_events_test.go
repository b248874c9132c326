package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/output"
	"asterion/jobs/provider"
)

// liveOutputConfig gives the live server a live output writer, and the server an output hub
// fed by it directly (as serve wires them).
func liveOutputConfig(t *testing.T) liveServerConfig {
	var hub *output.Hub
	tag := output.NewTag()
	return liveServerConfig{
		Jobs: func(cfg *jobs.Config) {
			w, err := output.NewWriter(output.WriterConfig{DB: cfg.DB, FlushEvery: 50 * time.Millisecond, Tag: tag,
				Publish: func(cs []db.OutputChunk) { hub.Publish(cs) }})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Output = w
			// The job pages show the progress the heartbeats carry: beat often enough to see it grow.
			cfg.HeartbeatInterval = 50 * time.Millisecond
		},
		Deps: func(d *dbtest.DB, deps *Deps) {
			var err error
			if hub, err = output.NewHub(output.HubConfig{DB: d.Bun, Pool: d.Pool, Tag: tag}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(hub.Start(context.Background()))
			<-hub.Ready()
			deps.Output = hub
		},
	}
}

// secondServer serves the same database from another server (another process, as far as the
// feeds are concerned: its own change-feed and output hubs) and returns its base URL.
func secondServer(t *testing.T, f *liveServer) string {
	t.Helper()
	var out *output.Hub
	// It runs no workers: its provider is never called.
	second := startLiveServerWith(t, liveServerConfig{DB: f.DB, HoldWorkers: true, Provider: provider.NewSim(provider.SimConfig{}),
		Deps: func(d *dbtest.DB, deps *Deps) {
			var err error
			if out, err = output.NewHub(output.HubConfig{DB: d.Bun, Pool: d.Pool, Tag: "second-server", Logger: deps.Logger}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(out.Start(context.Background()))
			<-out.Ready()
			deps.Output = out
		}})
	return second.Base
}

// outputEvents reads events of an output stream until n outputs arrived (n < 0: until its end
// event and the stream's close).
func outputEvents(t *testing.T, s *sseStream, n int) (outs []sseEvent, end *sseEvent) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n < 0 || len(outs) < n {
		e, ok := s.nextEvent(deadline)
		if !ok {
			if n < 0 && end != nil {
				return outs, end
			}
			t.Fatalf("stream ended or timed out after %d outputs (end %v)", len(outs), end)
		}
		switch e.Name {
		case "output":
			if end != nil {
				t.Fatalf("an output after the end: %+v", e)
			}
			outs = append(outs, e)
		case "end":
			end = &e
		}
	}
	return outs, end
}

type outputData struct {
	Seq  int    `json:"seq"`
	Text string `json:"text"`
}

// TestJobOutputEventsResumeOnAnotherServer: a reader that drops after chunk k and reconnects to
// another server with Last-Event-ID k gets k+1..n and the end, nothing twice, and together the
// chunks make the response; another org's token gets 404.
func TestJobOutputEventsResumeOnAnotherServer(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveOutputConfig(t))
	second := secondServer(t, f)
	u := f.user(t, "acme", "alice", identity.RoleMember)
	stranger := f.user(t, "globex", "gary", identity.RoleMember)
	sub := f.submit(t, u, "stream it #sim:tokens=60 #sim:latency=2s")
	path := "/sa-core/v1/jobs/" + sub.JobID + "/output/events"

	first := f.openEvents(t, path, u.Tok)
	head, _ := outputEvents(t, first, 3)
	first.Close()
	var text strings.Builder
	for i, e := range head {
		d := mustDecode[outputData](t, []byte(e.Data))
		if d.Seq != i+1 || e.ID != int64(i+1) {
			t.Fatalf("event %d: id %d seq %d", i, e.ID, d.Seq)
		}
		text.WriteString(d.Text)
	}

	other := &liveServer{Base: second, client: f.client}
	resumed := other.openEvents(t, path, u.Tok, "Last-Event-ID", "3")
	rest, end := outputEvents(t, resumed, -1)
	for i, e := range rest {
		d := mustDecode[outputData](t, []byte(e.Data))
		if d.Seq != 4+i || e.ID != int64(4+i) {
			t.Fatalf("resumed event %d: id %d seq %d, want %d", i, e.ID, d.Seq, 4+i)
		}
		text.WriteString(d.Text)
	}
	var fin struct {
		State      string  `json:"state"`
		ResponseID *string `json:"response_id"`
	}
	if err := json.Unmarshal([]byte(end.Data), &fin); err != nil || fin.State != "succeeded" || fin.ResponseID == nil {
		t.Fatalf("end %q (%v)", end.Data, err)
	}
	var resp db.Entity
	if err := f.DB.Bun.NewSelect().Model(&resp).Where("id = ?", *fin.ResponseID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if text.String() != resp.Body {
		t.Errorf("the chunks make %q, the response is %q", text.String(), resp.Body)
	}

	// A finished job's stream is its whole output and the end, then it closes.
	again := f.openEvents(t, path+"?after=0", u.Tok)
	all, _ := outputEvents(t, again, -1)
	if len(all) != 3+len(rest) {
		t.Errorf("replay of a finished job: %d outputs, want %d", len(all), 3+len(rest))
	}
	r := f.do(t, "GET", path, stranger.Tok, nil)
	if r.StatusCode != http.StatusNotFound {
		t.Errorf("another org's job: %s", r)
	}
	if r := f.do(t, "GET", path+"?after=x", u.Tok, nil); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("after=x: %s", r)
	}
}

// TestMissionEventsCarryJobOutput: the caller's mission stream carries job.output events of its
// running job in seq order, before the job's success; another org's stream carries none.
func TestMissionEventsCarryJobOutput(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveOutputConfig(t))
	u := f.user(t, "acme", "alice", identity.RoleMember)
	stranger := f.user(t, "globex", "gary", identity.RoleMember)
	mine := f.openEvents(t, "/sa-core/v1/mission/events", u.Tok)
	theirs := f.openEvents(t, "/sa-core/v1/mission/events", stranger.Tok)
	sub := f.submit(t, u, "narrate #sim:tokens=30 #sim:latency=1s")
	deadline := time.Now().Add(30 * time.Second)
	var text strings.Builder
	seq := 0
	for {
		e, ok := mine.nextEvent(deadline)
		if !ok {
			t.Fatalf("no success after %d outputs", seq)
		}
		if e.Name == "job.output" {
			var d struct {
				PromptID string    `json:"prompt_id"`
				JobID    string    `json:"job_id"`
				Seq      int       `json:"seq"`
				Text     string    `json:"text"`
				At       time.Time `json:"at"`
			}
			if err := json.Unmarshal([]byte(e.Data), &d); err != nil || d.JobID != sub.JobID || d.PromptID != sub.PromptID || e.HasID || d.At.IsZero() {
				t.Fatalf("job.output %+v (%v), id %v", d, err, e.HasID)
			}
			if d.Seq != seq+1 {
				t.Fatalf("job.output seq %d after %d", d.Seq, seq)
			}
			seq = d.Seq
			text.WriteString(d.Text)
			continue
		}
		if e.Name == "job.state_changed" && strings.Contains(e.Data, `"succeeded"`) {
			break
		}
	}
	if seq < 2 || len(strings.Fields(text.String())) != 30 {
		t.Errorf("%d outputs making %q, want the 30 words in several", seq, text.String())
	}
	for {
		select {
		case e, ok := <-theirs.C:
			if ok && e.Name == "job.output" {
				t.Errorf("another org's stream got %+v", e)
			}
			if ok {
				continue
			}
		default:
		}
		break
	}
}
