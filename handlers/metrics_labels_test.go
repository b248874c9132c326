package handlers

import (
	"bytes"
	"net/http"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"asterion/identity"
)

// After many concurrent GET, POST and HEAD requests on reused connections, /metrics still
// answers 200 with an exposition the Prometheus parser reads, and every method label is a real
// method: a label kept as a view of the transport's reused request buffer would read as the
// method of a later request (GETT, POS) or collide with another series of the same name.
func TestMetricsMethodLabelsSurviveMixedRequests(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "counter", identity.RoleMember)
	type call struct{ method, path, tok string }
	calls := []call{
		{"GET", "/healthz", ""},
		{"HEAD", "/healthz", ""},
		{"POST", "/sa-core/v1/prompt", ""},
		{"GET", "/sa-core/v1/mission/recent", u.Tok},
		{"POST", "/login", ""},
		{"GET", "/readyz", ""},
		{"HEAD", "/sa-core/v1/nothing-here", ""},
		{"POST", "/sa-core/v1/jobs/00000000-0000-0000-0000-000000000000/cancel", u.Tok},
	}
	const workers, each = 12, 30
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c := calls[(w+i)%len(calls)]
				req, err := http.NewRequest(c.method, f.Base+c.path, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if c.tok != "" {
					req.Header.Set("Authorization", "Bearer "+c.tok)
				}
				resp, err := f.client.Do(req)
				if err != nil {
					t.Errorf("%s %s: %v", c.method, c.path, err)
					return
				}
				_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	r := f.do(t, "GET", "/metrics", "", nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics after mixed requests: %s", r)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	real := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true,
		"DELETE": true, "OPTIONS": true, "CONNECT": true, "TRACE": true, "other": true}
	seen := map[string]bool{}
	for _, name := range []string{"asterion_http_requests_total", "asterion_http_request_duration_seconds"} {
		fam, ok := families[name]
		if !ok {
			t.Fatalf("the exposition has no %s", name)
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "method" {
					continue
				}
				if !real[l.GetValue()] {
					t.Errorf("%s has a method label %q", name, l.GetValue())
				}
				seen[l.GetValue()] = true
			}
		}
	}
	for _, m := range []string{"GET", "HEAD", "POST"} {
		if !seen[m] {
			t.Errorf("no series with method %s; seen %v", m, seen)
		}
	}
}
