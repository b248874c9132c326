package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"strings"
	"testing"
)

// TestBatchForm reads the bench's upload form back as the server would: a purpose `batch`
// and a file of exactly n lines, each a distinct chat completions request, and the length
// counted up front equals what is written.
func TestBatchForm(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 2500} {
		var buf bytes.Buffer
		if err := writeBatchForm(&buf, benchBatchBoundary, n); err != nil {
			t.Fatalf("n=%d: write: %v", n, err)
		}
		size, err := batchFormSize(benchBatchBoundary, n)
		if err != nil || size != int64(buf.Len()) {
			t.Fatalf("n=%d: counted %d bytes (%v), wrote %d", n, size, err, buf.Len())
		}
		mr := multipart.NewReader(&buf, benchBatchBoundary)
		var purpose string
		lines := -1
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("n=%d: read form: %v", n, err)
			}
			switch p.FormName() {
			case "purpose":
				b, _ := io.ReadAll(p)
				purpose = string(b)
			case "file":
				lines = checkBatchLines(t, p)
			default:
				t.Fatalf("n=%d: unexpected part %q", n, p.FormName())
			}
		}
		if purpose != "batch" || lines != n {
			t.Fatalf("n=%d: purpose %q, %d lines", n, purpose, lines)
		}
	}
}

// checkBatchLines checks every line of r is a request of the batch's shape with a custom id
// of its own, and returns how many there were.
func checkBatchLines(t *testing.T, r io.Reader) int {
	t.Helper()
	raw, _ := io.ReadAll(r)
	if !bytes.HasSuffix(raw, []byte("\n")) {
		t.Fatalf("the file does not end with a newline")
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
			Method   string `json:"method"`
			URL      string `json:"url"`
			Body     struct {
				Messages []struct{ Role, Content string } `json:"messages"`
			} `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", len(seen), err, sc.Text())
		}
		if l.CustomID == "" || seen[l.CustomID] || l.Method != "POST" || l.URL != "/v1/chat/completions" ||
			len(l.Body.Messages) != 1 || l.Body.Messages[0].Role != "user" || strings.TrimSpace(l.Body.Messages[0].Content) == "" {
			t.Fatalf("line %d has the wrong shape or a repeated custom_id: %s", len(seen), sc.Text())
		}
		seen[l.CustomID] = true
	}
	return len(seen)
}

// TestBatchRowsProbeBound: a probe that never started makes the max a lower bound, and no
// probe at all is said so rather than shown as 0 ms.
func TestBatchRowsProbeBound(t *testing.T) {
	t.Parallel()
	maxRow := func(b batchResult) string {
		var got string
		batchRows(&b, func(fig, av, _, _ string) {
			if strings.HasPrefix(fig, "small org") {
				got = av
			}
		})
		return got
	}
	if got := maxRow(batchResult{Lines: 2000, Probes: 3, Started: 3, Wait: latency{N: 3, MaxMs: 12.5}}); got != "12.5 ms" {
		t.Errorf("all started: %q, want 12.5 ms", got)
	}
	if got := maxRow(batchResult{Lines: 2000, Probes: 3, Started: 2, Wait: latency{N: 3, MaxMs: 30000}}); got != "≥ 30 s" {
		t.Errorf("one not started: %q, want ≥ 30 s", got)
	}
	if got := maxRow(batchResult{Lines: 2000}); !strings.HasPrefix(got, "n/a") {
		t.Errorf("no probe: %q, want n/a", got)
	}
}
