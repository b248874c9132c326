package deferred

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// propertySeed fixes the random documents, so a failure reproduces.
const propertySeed = 20260518

// propertyRounds is how many handles and how many status documents the
// property tests generate (fewer with -short).
func propertyRounds() int {
	if testing.Short() {
		return 500
	}
	return 5000
}

// gen draws the inputs of the constructors.
type gen struct{ *rand.Rand }

// text returns a valid UTF-8 string of up to max runes, empty only when
// allowEmpty, mixing ASCII, JSON-special, control, non-Latin and astral
// runes.
func (g gen) text(max int, allowEmpty bool) string {
	pools := []string{
		"abcdefghijklmnopqrstuvwxyz0123456789.-_",
		`"\/<>&'{}[]:,`,
		"\x00\x01\x1f\t\n\r\x7f",
		"ĀéßЖ中文日本語😀🚀\u2028\u2029\ufeff",
	}
	n := g.Intn(max + 1)
	if !allowEmpty && n == 0 {
		n = 1
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		pool := []rune(pools[g.Intn(len(pools))])
		b.WriteRune(pool[g.Intn(len(pool))])
	}
	return b.String()
}

func (g gen) subject() map[string]string {
	if g.Intn(8) == 0 {
		return nil
	}
	m := map[string]string{}
	for i := g.Intn(4); i > 0; i-- {
		m[g.text(12, false)] = g.text(40, true)
	}
	return m
}

func (g gen) time() time.Time {
	// 1970 .. 2200, any zone; whole seconds and whole microseconds often,
	// since a layout that drops a zero fraction fails only on those.
	sec := g.Int63n(7258118400)
	zone := time.FixedZone("z", (g.Intn(49)-24)*1800)
	var nsec int64
	switch g.Intn(3) {
	case 0:
		nsec = 0
	case 1:
		nsec = g.Int63n(1e6) * 1e3
	default:
		nsec = g.Int63n(1e9)
	}
	return time.Unix(sec, nsec).In(zone)
}

func (g gen) policy() Policy {
	if g.Intn(3) == 0 {
		return DefaultPolicy()
	}
	maxTTL := time.Duration(1+g.Int63n(int64(2*time.Hour))) * time.Duration(1+g.Intn(2))
	minR := 1 + g.Intn(60)
	maxR := minR + g.Intn(61-minR)
	p := Policy{MaxTTL: maxTTL, DefaultTTL: time.Duration(1 + g.Int63n(int64(maxTTL))), MinRetryAfter: minR, MaxRetryAfter: maxR}
	if g.Intn(4) == 0 {
		p = Policy{} // zero fields mean the defaults
	}
	return p
}

func (g gen) ttl() time.Duration {
	switch g.Intn(5) {
	case 0:
		return 0
	case 1:
		return -time.Duration(g.Int63())
	case 2:
		return time.Duration(g.Int63())
	}
	return time.Duration(g.Int63n(int64(time.Hour)))
}

func (g gen) retry() int {
	switch g.Intn(4) {
	case 0:
		return -g.Intn(1000)
	case 1:
		return g.Int()
	}
	return g.Intn(80)
}

// jsonValue returns a random JSON-able value of bounded depth.
func (g gen) jsonValue(depth int) any {
	k := g.Intn(7)
	if depth <= 0 && k >= 5 {
		k = g.Intn(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return g.Intn(2) == 0
	case 2:
		return g.NormFloat64() * 1e6
	case 3:
		return g.Int63()
	case 4:
		return g.text(20, true)
	case 5:
		a := make([]any, g.Intn(4))
		for i := range a {
			a[i] = g.jsonValue(depth - 1)
		}
		return a
	}
	return g.object(depth - 1)
}

func (g gen) object(depth int) map[string]any {
	m := map[string]any{}
	for i := g.Intn(5); i > 0; i-- {
		m[g.text(10, true)] = g.jsonValue(depth)
	}
	return m
}

// cancelKeys returns which cancel keys a marshalled document has.
func cancelKeys(t *testing.T, raw []byte) (href, reason bool, m map[string]any) {
	t.Helper()
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	_, href = m["cancel_href"]
	_, reason = m["cancel/unavailable-reason"]
	if r, ok := m["cancel/unavailable-reason"].(string); ok && r == "" {
		t.Fatalf("%s: empty cancel/unavailable-reason", raw)
	}
	return href, reason, m
}

func TestPropertyHandles(t *testing.T) {
	g := gen{rand.New(rand.NewSource(propertySeed))}
	for i := 0; i < propertyRounds(); i++ {
		req := HandleRequest{
			Kind:              g.text(24, false),
			Owner:             g.text(24, false),
			Subject:           g.subject(),
			CorrelationID:     g.text(16, true),
			TTL:               g.ttl(),
			RetryAfterSeconds: g.retry(),
		}
		if g.Intn(3) == 0 {
			req.IdempotencyKey = g.text(30, false)
		}
		if g.Intn(2) == 0 {
			req.NotCancelableReason = g.text(60, false)
		}
		if g.Intn(2) == 0 {
			req.Status = StatusRunning
		}
		policy, now := g.policy(), g.time()
		h, err := NewHandle(req, policy, now)
		if err != nil {
			t.Fatalf("round %d: NewHandle(%+v) = %v", i, req, err)
		}
		raw, err := json.Marshal(h)
		if err != nil {
			t.Fatalf("round %d: Marshal = %v", i, err)
		}
		if err := ValidateHandle(raw); err != nil {
			t.Fatalf("round %d: %s\n%v", i, raw, err)
		}
		href, reason, _ := cancelKeys(t, raw)
		if href == reason {
			t.Fatalf("round %d: cancel rule broken (href %v, reason %v): %s", i, href, reason, raw)
		}
		if href != (req.NotCancelableReason == "") {
			t.Fatalf("round %d: cancel surface does not follow the request: %s", i, raw)
		}
		e := policy.effective()
		if ttl := h.ExpiresAt.Sub(h.AcceptedAt); ttl <= 0 || ttl > e.MaxTTL {
			t.Fatalf("round %d: ttl %v outside (0, %v]", i, ttl, e.MaxTTL)
		}
		if h.RetryAfterSeconds < e.MinRetryAfter || h.RetryAfterSeconds > e.MaxRetryAfter {
			t.Fatalf("round %d: retry %d outside %d..%d", i, h.RetryAfterSeconds, e.MinRetryAfter, e.MaxRetryAfter)
		}
		if h.OperationID != OperationID(req.Kind, req.Owner, req.Subject, req.IdempotencyKey) {
			t.Fatalf("round %d: id is not OperationID", i)
		}
		back, err := ParseHandle(raw)
		if err != nil {
			t.Fatalf("round %d: ParseHandle(%s) = %v", i, raw, err)
		}
		if !reflect.DeepEqual(back, h) {
			t.Fatalf("round %d: round trip\n got %+v\nwant %+v", i, back, h)
		}
	}
}

func TestPropertyStatusDocs(t *testing.T) {
	g := gen{rand.New(rand.NewSource(propertySeed + 1))}
	statuses := Statuses()
	seen := map[Status]int{}
	for i := 0; i < propertyRounds(); i++ {
		id := uuid.New()
		if g.Intn(2) == 0 {
			id = OperationID(g.text(8, false), g.text(8, false), g.subject(), "")
		}
		kind, upd, exp := g.text(24, false), g.time(), g.time()
		status := statuses[g.Intn(len(statuses))]
		var d StatusDoc
		var err error
		switch {
		case !status.Terminal():
			cancel := Cancelable(CancelHref(id))
			if g.Intn(2) == 0 {
				cancel = NotCancelable(g.text(60, false))
			}
			d, err = NewActiveStatus(id, kind, status, upd, exp, DefaultPolicy().ClampRetryAfter(g.retry()), cancel)
		case status == StatusCompleted:
			var result []byte
			result, err = json.MarshalIndent(g.object(3), "", " ")
			if err != nil {
				t.Fatal(err)
			}
			d, err = NewCompletedStatus(id, kind, upd, exp, result)
		case status == StatusCancelled:
			d, err = NewCancelledStatus(id, kind, upd, exp)
		default:
			d, err = NewFailedStatus(id, kind, status, upd, exp, ErrorInfo{Kind: g.text(12, false), Message: g.text(80, false)})
		}
		if err != nil {
			t.Fatalf("round %d: constructing %s: %v", i, status, err)
		}
		seen[status]++
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("round %d: Marshal = %v", i, err)
		}
		if err := ValidateStatus(raw); err != nil {
			t.Fatalf("round %d: %s\n%v", i, raw, err)
		}
		href, reason, m := cancelKeys(t, raw)
		if status.Terminal() && (href || reason) {
			t.Fatalf("round %d: terminal document with a cancel surface: %s", i, raw)
		}
		if !status.Terminal() && href == reason {
			t.Fatalf("round %d: cancel rule broken: %s", i, raw)
		}
		_, hasResult := m["result"]
		_, hasError := m["error"]
		_, hasRetry := m["retry_after_seconds"]
		if m["terminal"] != status.Terminal() || hasResult != (status == StatusCompleted) || hasError != status.CarriesError() || hasRetry == status.Terminal() {
			t.Fatalf("round %d: field rules broken: %s", i, raw)
		}
		if !utf8.Valid(raw) {
			t.Fatalf("round %d: not UTF-8: %q", i, raw)
		}
		back, err := ParseStatusDoc(raw)
		if err != nil {
			t.Fatalf("round %d: ParseStatusDoc(%s) = %v", i, raw, err)
		}
		if !reflect.DeepEqual(back, d) {
			t.Fatalf("round %d: round trip\n got %+v\nwant %+v", i, back, d)
		}
	}
	for _, s := range statuses {
		if seen[s] == 0 {
			t.Errorf("status %s never generated", s)
		}
	}
}
