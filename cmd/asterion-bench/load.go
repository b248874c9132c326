package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// target is a server under load.
type target struct {
	name   string
	submit string // URL of the submit endpoint
	token  string
	client *http.Client
}

func newTarget(name, submitURL, token string) *target {
	tr := &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute}
	return &target{name: name, submit: submitURL, token: token, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

var seq atomic.Int64

// post submits one prompt and returns its latency; ok is false on a non-202.
func (t *target) post() (time.Duration, bool) {
	body := fmt.Sprintf(`{"prompt":"bench prompt %d"}`, seq.Add(1))
	req, _ := http.NewRequest(http.MethodPost, t.submit, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return time.Since(start), false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start), resp.StatusCode == http.StatusAccepted
}

// result summarises one load phase.
type result struct {
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput_per_s"`
	P50ms      float64 `json:"p50_ms"`
	P95ms      float64 `json:"p95_ms"`
	P99ms      float64 `json:"p99_ms"`
}

func summarise(lat []time.Duration, errs int, elapsed time.Duration) result {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	return result{Requests: len(lat), Errors: errs, Seconds: elapsed.Seconds(),
		Throughput: float64(len(lat)-errs) / elapsed.Seconds(), P50ms: q(0.50), P95ms: q(0.95), P99ms: q(0.99)}
}

// closedLoop runs clients that each submit back to back for d.
func closedLoop(t *target, clients int, d time.Duration) result {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				l, ok := t.post()
				mine = append(mine, l)
				if !ok {
					bad++
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	return summarise(lat, errs, time.Since(start))
}

// openLoop offers rate submits per second for d, each on schedule whatever the answers do;
// latency counts from the scheduled send time, so a slow server cannot slow the offer.
func openLoop(t *target, rate int, d time.Duration) result {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	n := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4000)
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(at time.Time) {
			defer wg.Done()
			defer func() { <-sem }()
			_, ok := t.post()
			l := time.Since(at)
			mu.Lock()
			lat = append(lat, l)
			if !ok {
				errs++
			}
			mu.Unlock()
		}(at)
	}
	wg.Wait()
	return summarise(lat, errs, time.Since(start))
}
