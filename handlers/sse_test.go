package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

const eventsPath = "/sa-core/v1/mission/events"

// openMission opens the mission event stream as u and requires ": connected" first.
func (f *liveServer) openMission(t *testing.T, u liveUser, hdr ...string) *sseStream {
	t.Helper()
	s := f.openEvents(t, eventsPath, u.Tok, hdr...)
	if ct := s.Resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	if cc := s.Resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-cache") {
		t.Errorf("Cache-Control %q, want no-cache", cc)
	}
	e, ok := s.next(5 * time.Second)
	if !ok || e.Comment != "connected" {
		t.Fatalf("first thing on the stream is %+v (ok %v), want the comment \": connected\"", e, ok)
	}
	return s
}

// jobEvent checks one job.state_changed event and decodes its data.
func jobEvent(t *testing.T, e sseEvent) jobEventData {
	t.Helper()
	if e.Name != "job.state_changed" || !e.HasID || e.ID <= 0 {
		t.Fatalf("event %+v: want job.state_changed with a positive id", e)
	}
	if strings.Contains(e.Data, "\n") {
		t.Errorf("data is not one line: %q", e.Data)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(e.Data), &raw); err != nil {
		t.Fatalf("event data %q: %v", e.Data, err)
	}
	for _, k := range []string{"prompt_id", "job_id", "state", "attempt", "error_kind", "response_id", "updated_at"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("event data has no %q: %s", k, e.Data)
		}
	}
	d := mustDecode[jobEventData](t, []byte(e.Data))
	if _, err := time.Parse(time.RFC3339Nano, d.UpdatedAt); err != nil {
		t.Errorf("updated_at %q: %v", d.UpdatedAt, err)
	}
	return d
}

// collect reads events until done says so or the deadline passes, checking that ids strictly
// increase.
func collect(t *testing.T, s *sseStream, after int64, timeout time.Duration, done func([]sseEvent) bool) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.Now().Add(timeout)
	last := after
	for !done(got) {
		e, ok := s.nextEvent(deadline)
		if !ok {
			break
		}
		if e.ID <= last {
			t.Errorf("event id %d after %d: ids must strictly increase", e.ID, last)
		}
		last = e.ID
		got = append(got, e)
	}
	return got
}

func TestMissionEventsStream(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	s := f.openMission(t, alice)

	sub := f.submit(t, alice, "stream me")
	evs := collect(t, s, 0, 15*time.Second, func(got []sseEvent) bool {
		return len(got) > 0 && strings.Contains(got[len(got)-1].Data, `"state":"succeeded"`)
	})
	var states []string
	var prev time.Time
	for _, e := range evs {
		d := jobEvent(t, e)
		if d.PromptID != sub.PromptID || d.JobID != sub.JobID || d.Attempt != 1 {
			t.Errorf("event %s is not about job %s of prompt %s", e.Data, sub.JobID, sub.PromptID)
		}
		at, _ := time.Parse(time.RFC3339Nano, d.UpdatedAt)
		if at.Before(prev) {
			t.Errorf("updated_at went backwards: %s", e.Data)
		}
		prev = at
		states = append(states, d.State)
		if d.State == "succeeded" && (d.ResponseID == nil || *d.ResponseID == "") {
			t.Errorf("succeeded without response_id: %s", e.Data)
		}
		if d.State != "succeeded" && d.ResponseID != nil {
			t.Errorf("%s with a response_id: %s", d.State, e.Data)
		}
		if d.ErrorKind != nil {
			t.Errorf("error_kind on a clean run: %s", e.Data)
		}
	}
	if got := strings.Join(states, " → "); got != "queued → running → succeeded" {
		t.Errorf("states %s, want queued → running → succeeded", got)
	}
	if j := f.job(t, alice, sub.JobID); len(evs) > 0 && (j.ResponseID == nil ||
		*j.ResponseID != *jobEvent(t, evs[len(evs)-1]).ResponseID) {
		t.Errorf("the event's response_id is not the job's")
	}

	// The token is required; the query-string form of Last-Event-ID is a number too.
	checkProblem(t, f.do(t, "GET", eventsPath, "", nil), http.StatusUnauthorized)
}

// userEvents returns the numbers of job events about user's work after seq, from the table.
func (f *liveServer) userEvents(t *testing.T, userID, after int64) []int64 {
	t.Helper()
	var seqs []int64
	rows, err := f.DB.Bun.QueryContext(context.Background(),
		"SELECT seq FROM sa_event WHERE topic = 'job' AND user_id = ? AND seq > ? ORDER BY seq", userID, after)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func ids(evs []sseEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func TestMissionEventsResume(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	bob := f.user(t, "acme", "bob", identity.RoleMember) // noise of the same org

	s1 := f.openMission(t, alice)
	p1 := f.submit(t, alice, "first")
	first, ok := s1.nextEvent(time.Now().Add(10 * time.Second))
	if !ok {
		t.Fatal("no first event")
	}
	if d := jobEvent(t, first); d.JobID != p1.JobID || d.State != "queued" {
		t.Fatalf("first event %s, want job %s queued", first.Data, p1.JobID)
	}
	s1.Close()

	// While disconnected: more work, all of it finished and numbered before the reconnect.
	jobsDone := []string{p1.JobID}
	for i := range 3 {
		jobsDone = append(jobsDone, f.submit(t, alice, fmt.Sprintf("while away %d", i)).JobID)
		f.submit(t, bob, "bob's")
	}
	for _, id := range jobsDone {
		f.waitJob(t, alice, id, "succeeded")
	}
	f.waitSequenced(t)

	// Reconnect: everything after the last seen id, then live events, each exactly once, even
	// with new work racing the switch from replay to live.
	s2 := f.openMission(t, alice, "Last-Event-ID", strconv.FormatInt(first.ID, 10))
	racing := make(chan string, 4)
	var reqs []*http.Request
	for i := range 4 {
		reqs = append(reqs, f.request(t, "POST", "/sa-core/v1/prompt", alice.Tok, map[string]any{"prompt": fmt.Sprintf("racing %d", i)}))
	}
	go func() {
		defer close(racing)
		for _, req := range reqs {
			resp, err := f.client.Do(req)
			if err != nil {
				return
			}
			var sub liveSubmitted
			_ = json.NewDecoder(resp.Body).Decode(&sub)
			resp.Body.Close()
			racing <- sub.JobID
		}
	}()
	for id := range racing {
		if id == "" {
			t.Fatal("a racing submission failed")
		}
		f.waitJob(t, alice, id, "succeeded")
	}
	f.waitSequenced(t)
	want := f.userEvents(t, alice.ID, first.ID)
	if len(want) != 2+3*3+4*3 {
		t.Errorf("the table holds %d later events of alice, want %d", len(want), 2+3*3+4*3)
	}
	got := collect(t, s2, first.ID, 15*time.Second, func(got []sseEvent) bool { return len(got) >= len(want) })
	// Anything more (a duplicate, an event of bob) would arrive now.
	if extra, ok := s2.nextEvent(time.Now().Add(1500 * time.Millisecond)); ok {
		got = append(got, extra)
	}
	if fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Errorf("after reconnecting at %d the stream carried ids\n%v\nthe table holds\n%v", first.ID, ids(got), want)
	}
	perJob := map[string][]string{}
	for _, e := range got {
		d := jobEvent(t, e)
		perJob[d.JobID] = append(perJob[d.JobID], d.State)
	}
	if s := strings.Join(perJob[p1.JobID], " "); s != "running succeeded" {
		t.Errorf("the first job's events after the first: %s", s)
	}
	for id, states := range perJob {
		if id != p1.JobID && strings.Join(states, " ") != "queued running succeeded" {
			t.Errorf("job %s: %v", id, states)
		}
	}

	// The query-string form resumes the same way; a garbage id means "from now".
	s3 := f.openEvents(t, eventsPath+"?last_event_id="+strconv.FormatInt(want[len(want)-2], 10), alice.Tok)
	if e, ok := s3.next(5 * time.Second); !ok || e.Comment != "connected" {
		t.Fatalf("first on the stream: %+v", e)
	}
	if e, ok := s3.nextEvent(time.Now().Add(5 * time.Second)); !ok || e.ID != want[len(want)-1] {
		t.Errorf("last_event_id=%d replayed %+v, want id %d", want[len(want)-2], e, want[len(want)-1])
	}
	s4 := f.openMission(t, alice, "Last-Event-ID", "not-a-number")
	if e, ok := s4.nextEvent(time.Now().Add(time.Second)); ok {
		t.Errorf("a garbage Last-Event-ID replayed %+v", e)
	}
}

func TestMissionEventsScope(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	bob := f.user(t, "acme", "bob", identity.RoleMember)
	olga := f.user(t, "acme", "olga", identity.RoleOperator)
	gary := f.user(t, "globex", "gary", identity.RoleMember)
	members := []liveUser{alice, bob, gary}

	streams := map[string]*sseStream{}
	for _, u := range append(members, olga) {
		streams[u.Name] = f.openMission(t, u)
	}
	jobsOf := map[string]map[string]bool{}
	for _, u := range members {
		jobsOf[u.Name] = map[string]bool{}
	}
	for i := range 2 {
		for _, u := range members {
			jobsOf[u.Name][f.submit(t, u, fmt.Sprintf("%s %d", u.Name, i)).JobID] = true
		}
	}
	acme := map[string]bool{}
	for _, u := range []liveUser{alice, bob} {
		for j := range jobsOf[u.Name] {
			acme[j] = true
		}
	}
	allowed := map[string]map[string]bool{"alice": jobsOf["alice"], "bob": jobsOf["bob"], "gary": jobsOf["gary"], "olga": acme}
	// Once every job has succeeded, each member submits a fence: a stream delivers in order,
	// so by its fence's event it has delivered every event of the jobs above, and anything
	// out of scope would have shown. Bob's fence, the later of acme's, is the operator's.
	for _, u := range members {
		for j := range jobsOf[u.Name] {
			f.waitJob(t, u, j, "succeeded")
		}
	}
	fences := map[string]string{}
	for _, u := range members {
		fences[u.Name] = f.submit(t, u, "fence of "+u.Name).JobID
	}
	fences["olga"] = fences["bob"]
	fenceAllowed := map[string][]string{"alice": {"alice"}, "bob": {"bob"}, "gary": {"gary"}, "olga": {"alice", "bob"}}
	for name, s := range streams {
		allow := allowed[name]
		inScope := map[string]bool{}
		for _, of := range fenceAllowed[name] {
			inScope[fences[of]] = true
		}
		succeeded := map[string]bool{}
		last := int64(0)
		deadline := time.Now().Add(20 * time.Second)
		for {
			e, ok := s.nextEvent(deadline)
			if !ok {
				t.Fatalf("%s's stream ended or timed out before its fence (saw %d of its %d jobs succeed)", name, len(succeeded), len(allow))
			}
			if e.ID <= last {
				t.Errorf("%s: event id %d after %d", name, e.ID, last)
			}
			last = e.ID
			d := jobEvent(t, e)
			if !allow[d.JobID] && !inScope[d.JobID] {
				t.Errorf("%s's stream carried job %s of someone it may not see: %s", name, d.JobID, e.Data)
			}
			if allow[d.JobID] && d.State == "succeeded" {
				succeeded[d.JobID] = true
			}
			if d.JobID == fences[name] {
				break
			}
		}
		if len(succeeded) != len(allow) {
			t.Errorf("%s saw %d of its %d jobs succeed", name, len(succeeded), len(allow))
		}
	}
}

func TestMissionEventsShutdown(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	streams := []*sseStream{f.openMission(t, alice), f.openMission(t, alice)}
	took, late, err := f.shutdown()
	t.Logf("Serve returned %v after %v with two open streams", err, took)
	// Serve's graceful shutdown fails when open connections outlast its 5 s: a nil error is
	// the server's own word that the streams ended in time, whatever the machine's speed.
	if late {
		t.Fatalf("Serve had not returned %v after shutdown began", took)
	}
	if err != nil {
		t.Errorf("Serve returned %v: the open streams held the shutdown", err)
	}
	for _, s := range streams {
		select {
		case <-s.done:
		case <-time.After(6 * time.Second):
			t.Errorf("an open stream did not end within 6 s of shutdown")
		}
	}
}

func TestParseLastEventID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"": 0, "0": 0, "1": 1, " 42 ": 42, "-5": 0, "x": 0, "1.5": 0, "9223372036854775807": math.MaxInt64,
		"9223372036854775808": 0, "00000000000000000001": 0, "+7": 7, "1e3": 0, "0x10": 0,
	} {
		if got := parseLastEventID(in); got != want {
			t.Errorf("parseLastEventID(%q) = %d, want %d", in, got, want)
		}
	}
}

func FuzzParseLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "1", "42", "-1", "9223372036854775807", "9223372036854775808", " 7 ", "abc", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := parseLastEventID(s)
		if n < 0 {
			t.Fatalf("parseLastEventID(%q) = %d < 0", s, n)
		}
		if n > 0 && parseLastEventID(strconv.FormatInt(n, 10)) != n {
			t.Fatalf("%d does not round-trip", n)
		}
		// A plain decimal number that fits is read exactly.
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= 0 && len(s) <= 19 && !strings.HasPrefix(s, "+") {
			if n != v {
				t.Fatalf("parseLastEventID(%q) = %d, want %d", s, n, v)
			}
		}
	})
}
