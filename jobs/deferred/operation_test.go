package deferred

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func promptRequest() HandleRequest {
	return HandleRequest{
		Kind:              "prompt.execute",
		Owner:             "asterion.prompt-worker",
		Subject:           map[string]string{"prompt_id": "p-1", "job_id": "j-1"},
		CorrelationID:     "req-1",
		RetryAfterSeconds: 2,
	}
}

func TestNewHandle(t *testing.T) {
	now := time.Date(2026, 5, 18, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
	h, err := NewHandle(promptRequest(), DefaultPolicy(), now)
	if err != nil {
		t.Fatal(err)
	}
	wantID := OperationID("prompt.execute", "asterion.prompt-worker", map[string]string{"prompt_id": "p-1", "job_id": "j-1"}, "")
	if h.OperationID != wantID || h.Status != StatusPending || h.RetryAfterSeconds != 2 {
		t.Errorf("handle = %+v", h)
	}
	if !h.AcceptedAt.Equal(NormalizeTime(now)) || h.ExpiresAt.Sub(h.AcceptedAt) != 15*time.Minute {
		t.Errorf("times = %v .. %v", h.AcceptedAt, h.ExpiresAt)
	}
	if h.StatusHref != "/sa-core/v1/deferred-operations/"+wantID.String()+"/status" || h.Cancel.Href() != "/sa-core/v1/deferred-operations/"+wantID.String()+"/cancel" {
		t.Errorf("hrefs = %s %v", h.StatusHref, h.Cancel)
	}
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateHandle(raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if m["schema"] != HandleSchema || m["accepted_at"] != "2026-05-18T09:00:00.123456Z" || m["cancel_href"] == nil {
		t.Errorf("wire = %s", raw)
	}
	if _, ok := m["cancel/unavailable-reason"]; ok {
		t.Errorf("both cancel surfaces in %s", raw)
	}
	back, err := ParseHandle(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, h) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, h)
	}

	// The subject is copied, so a later change by the caller does not leak in.
	req := promptRequest()
	h2, _ := NewHandle(req, DefaultPolicy(), now)
	req.Subject["job_id"] = "changed"
	if h2.Subject["job_id"] != "j-1" {
		t.Error("subject is aliased")
	}
}

func TestNewHandleOptions(t *testing.T) {
	now := time.Date(2026, 5, 18, 10, 0, 0, 0, time.UTC)
	req := promptRequest()
	req.NotCancelableReason = "irreversible"
	req.Status = StatusRunning
	req.TTL = time.Hour
	req.RetryAfterSeconds = 600
	req.IdempotencyKey = "user-1:key-1"
	req.Subject = nil
	req.CorrelationID = ""
	h, err := NewHandle(req, DefaultPolicy(), now)
	if err != nil {
		t.Fatal(err)
	}
	if h.Cancel.IsCancelable() || h.Cancel.UnavailableReason() != "irreversible" || h.Status != StatusRunning ||
		h.ExpiresAt.Sub(h.AcceptedAt) != 15*time.Minute || h.RetryAfterSeconds != 60 ||
		h.OperationID != OperationID(req.Kind, req.Owner, nil, "user-1:key-1") {
		t.Errorf("handle = %+v", h)
	}
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateHandle(raw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"cancel/unavailable-reason":"irreversible"`) || !strings.Contains(string(raw), `"subject":{}`) ||
		strings.Contains(string(raw), "correlation_id") || strings.Contains(string(raw), "cancel_href") {
		t.Errorf("wire = %s", raw)
	}

	for name, mut := range map[string]func(*HandleRequest){
		"terminal status": func(r *HandleRequest) { r.Status = StatusCompleted },
		"bogus status":    func(r *HandleRequest) { r.Status = "queued" },
		"no kind":         func(r *HandleRequest) { r.Kind = "" },
		"no owner":        func(r *HandleRequest) { r.Owner = "" },
		"bad utf8":        func(r *HandleRequest) { r.Owner = "\xff" },
		"empty subj key":  func(r *HandleRequest) { r.Subject = map[string]string{"": "x"} },
	} {
		r := promptRequest()
		mut(&r)
		if _, err := NewHandle(r, DefaultPolicy(), now); !errors.Is(err, ErrInvalidOperation) {
			t.Errorf("%s: NewHandle error %v, want ErrInvalidOperation", name, err)
		}
	}
	if _, err := NewHandle(promptRequest(), Policy{MaxTTL: -1}, now); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("bad policy: %v", err)
	}
	if _, err := NewHandle(promptRequest(), DefaultPolicy(), time.Time{}); !errors.Is(err, ErrInvalidOperation) {
		t.Errorf("zero now: %v", err)
	}
}

func validHandle(t *testing.T) Handle {
	t.Helper()
	h, err := NewHandle(promptRequest(), DefaultPolicy(), time.Date(2026, 5, 18, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHandleMarshalRefuses(t *testing.T) {
	cases := []struct {
		name   string
		mut    func(*Handle)
		cancel bool // the break is of the cancel rule
	}{
		{"neither cancel surface", func(h *Handle) { h.Cancel = Cancel{} }, true},
		{"empty reason", func(h *Handle) { h.Cancel = NotCancelable("") }, true},
		{"empty cancel href", func(h *Handle) { h.Cancel = Cancelable("") }, true},
		{"nil id", func(h *Handle) { h.OperationID = uuid.Nil }, false},
		{"terminal", func(h *Handle) { h.Status = StatusFailed }, false},
		{"retry 0", func(h *Handle) { h.RetryAfterSeconds = 0 }, false},
		{"retry 61", func(h *Handle) { h.RetryAfterSeconds = 61 }, false},
		{"expires before", func(h *Handle) { h.ExpiresAt = h.AcceptedAt.Add(-time.Second) }, false},
		{"expires same", func(h *Handle) { h.ExpiresAt = h.AcceptedAt }, false},
		{"no status href", func(h *Handle) { h.StatusHref = "" }, false},
		{"bad status href", func(h *Handle) { h.StatusHref = "http://[::1" }, false},
		{"zero accepted", func(h *Handle) { h.AcceptedAt = time.Time{} }, false},
		{"year 10000", func(h *Handle) { h.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, false},
	}
	for _, c := range cases {
		h := validHandle(t)
		c.mut(&h)
		_, err := json.Marshal(h)
		if !errors.Is(err, ErrInvalidOperation) {
			t.Errorf("%s: Marshal error %v, want ErrInvalidOperation", c.name, err)
		}
		if errors.Is(err, ErrCancelSurface) != c.cancel {
			t.Errorf("%s: Marshal error %v; wraps ErrCancelSurface = %v, want %v", c.name, err, !c.cancel, c.cancel)
		}
	}
}

func TestHandleUnmarshalRefuses(t *testing.T) {
	h := validHandle(t)
	raw, _ := json.Marshal(h)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	m["expires_at"] = m["accepted_at"] // schema-valid, but breaks expires after accepted
	bad, _ := json.Marshal(m)
	if err := ValidateHandle(bad); err != nil {
		t.Fatalf("expected schema-valid: %v", err)
	}
	if _, err := ParseHandle(bad); !errors.Is(err, ErrInvalidDocument) || !errors.Is(err, ErrInvalidOperation) {
		t.Errorf("ParseHandle = %v, want ErrInvalidDocument and ErrInvalidOperation", err)
	}
	var into Handle
	if err := json.Unmarshal([]byte(`{"schema":"deferred-operation.v1"}`), &into); !errors.Is(err, ErrInvalidDocument) {
		t.Errorf("Unmarshal = %v", err)
	}
}

func TestStatusConstructors(t *testing.T) {
	id := uuid.MustParse("0b6f8e1c-6f3e-5a7d-9a51-2f4d1c7e8b90")
	upd := time.Date(2026, 5, 18, 10, 0, 3, 0, time.UTC)
	exp := upd.Add(10 * time.Minute)
	mk := func(d StatusDoc, err error) StatusDoc {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	docs := []StatusDoc{
		mk(NewActiveStatus(id, "k", StatusRunning, upd, exp, 2, Cancelable(CancelHref(id)))),
		mk(NewActiveStatus(id, "k", StatusPending, upd, exp, 60, NotCancelable("no"))),
		mk(NewCompletedStatus(id, "k", upd, exp, json.RawMessage(" { \"text\" : \"hi\" } "))),
		mk(NewCancelledStatus(id, "k", upd, exp)),
	}
	for _, s := range []Status{StatusFailed, StatusTimedOut, StatusExpired, StatusUnknown} {
		docs = append(docs, mk(NewFailedStatus(id, "k", s, upd, exp, ErrorInfo{Kind: "timeout", Message: "too slow"})))
	}
	for _, d := range docs {
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateStatus(raw); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
		back, err := ParseStatusDoc(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if !reflect.DeepEqual(back, d) {
			t.Errorf("round trip:\n got %+v\nwant %+v", back, d)
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		if m["terminal"] != d.Status.Terminal() {
			t.Errorf("%s: terminal disagrees", raw)
		}
	}
	if string(docs[2].Result) != `{"text":"hi"}` {
		t.Errorf("result not compacted: %s", docs[2].Result)
	}

	// Constructors refuse what would break the contract.
	refuse := map[string]error{}
	_, refuse["active terminal"] = NewActiveStatus(id, "k", StatusCompleted, upd, exp, 2, Cancelable("/c"))
	_, refuse["active bogus"] = NewActiveStatus(id, "k", "queued", upd, exp, 2, Cancelable("/c"))
	_, refuse["active no cancel"] = NewActiveStatus(id, "k", StatusRunning, upd, exp, 2, Cancel{})
	_, refuse["active retry 0"] = NewActiveStatus(id, "k", StatusRunning, upd, exp, 0, Cancelable("/c"))
	_, refuse["completed array"] = NewCompletedStatus(id, "k", upd, exp, json.RawMessage(`[1]`))
	_, refuse["completed null"] = NewCompletedStatus(id, "k", upd, exp, json.RawMessage(`null`))
	_, refuse["completed empty"] = NewCompletedStatus(id, "k", upd, exp, nil)
	_, refuse["completed bad json"] = NewCompletedStatus(id, "k", upd, exp, json.RawMessage(`{`))
	_, refuse["failed as cancelled"] = NewFailedStatus(id, "k", StatusCancelled, upd, exp, ErrorInfo{"a", "b"})
	_, refuse["failed as completed"] = NewFailedStatus(id, "k", StatusCompleted, upd, exp, ErrorInfo{"a", "b"})
	_, refuse["failed no kind"] = NewFailedStatus(id, "k", StatusFailed, upd, exp, ErrorInfo{"", "b"})
	_, refuse["failed no message"] = NewFailedStatus(id, "k", StatusFailed, upd, exp, ErrorInfo{"a", ""})
	_, refuse["cancelled nil id"] = NewCancelledStatus(uuid.Nil, "k", upd, exp)
	_, refuse["cancelled no kind"] = NewCancelledStatus(id, "", upd, exp)
	for name, err := range refuse {
		if !errors.Is(err, ErrInvalidOperation) {
			t.Errorf("%s: error %v, want ErrInvalidOperation", name, err)
		}
	}
}

func TestStatusDocMarshalRefuses(t *testing.T) {
	id := uuid.MustParse("0b6f8e1c-6f3e-5a7d-9a51-2f4d1c7e8b90")
	upd := time.Date(2026, 5, 18, 10, 0, 3, 0, time.UTC)
	base := func() StatusDoc {
		d, err := NewCancelledStatus(id, "k", upd, upd)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := map[string]func(*StatusDoc){
		"terminal with cancel":     func(d *StatusDoc) { d.Cancel = Cancelable("/c") },
		"terminal with reason":     func(d *StatusDoc) { d.Cancel = NotCancelable("r") },
		"terminal with retry":      func(d *StatusDoc) { d.RetryAfterSeconds = 2 },
		"cancelled with error":     func(d *StatusDoc) { d.Error = &ErrorInfo{"a", "b"} },
		"cancelled with result":    func(d *StatusDoc) { d.Result = json.RawMessage(`{}`) },
		"running without cancel":   func(d *StatusDoc) { d.Status = StatusRunning; d.RetryAfterSeconds = 2 },
		"running without retry":    func(d *StatusDoc) { d.Status = StatusRunning; d.Cancel = Cancelable("/c") },
		"completed without result": func(d *StatusDoc) { d.Status = StatusCompleted },
		"failed without error":     func(d *StatusDoc) { d.Status = StatusFailed },
		"unknown status value":     func(d *StatusDoc) { d.Status = "succeeded" },
		"zero updated":             func(d *StatusDoc) { d.UpdatedAt = time.Time{} },
		"completed with error too": func(d *StatusDoc) {
			d.Status = StatusCompleted
			d.Result = json.RawMessage(`{}`)
			d.Error = &ErrorInfo{"a", "b"}
		},
		"timed-out with result too": func(d *StatusDoc) {
			d.Status = StatusTimedOut
			d.Error = &ErrorInfo{"a", "b"}
			d.Result = json.RawMessage(`{}`)
		},
	}
	for name, mut := range cases {
		d := base()
		mut(&d)
		if _, err := json.Marshal(d); !errors.Is(err, ErrInvalidOperation) {
			t.Errorf("%s: Marshal error %v, want ErrInvalidOperation", name, err)
		}
	}
}

func TestInitialStatus(t *testing.T) {
	h := validHandle(t)
	d, err := h.InitialStatus()
	if err != nil {
		t.Fatal(err)
	}
	if d.OperationID != h.OperationID || d.Status != h.Status || !d.UpdatedAt.Equal(h.AcceptedAt) || d.Cancel != h.Cancel || d.RetryAfterSeconds != h.RetryAfterSeconds {
		t.Errorf("InitialStatus = %+v", d)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateStatus(raw); err != nil {
		t.Error(err)
	}
}
