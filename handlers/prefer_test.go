package handlers

import (
	"strings"
	"testing"
)

func TestParsePreferWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []string
		want int
	}{
		{nil, 0},
		{[]string{"wait=5"}, 5},
		{[]string{"respond-async, wait=10"}, 10},
		{[]string{"respond-async", "Wait = 7"}, 7},
		{[]string{`wait="3"`}, 3},
		{[]string{"wait=5; foo=bar"}, 5},
		{[]string{"wait=0"}, 0},
		{[]string{"wait=61"}, 0},
		{[]string{"wait=-1"}, 0},
		{[]string{"wait=1.5"}, 0},
		{[]string{"wait"}, 0},
		{[]string{"wait=999999999999999999999"}, 0},
		{[]string{"return=minimal"}, 0},
		{[]string{"wait=2, wait=9"}, 2},
	}
	for _, tt := range tests {
		if got := parsePreferWait(tt.in); got != tt.want {
			t.Errorf("parsePreferWait(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func FuzzParsePreferWait(f *testing.F) {
	for _, s := range []string{"wait=5", "respond-async, wait=10", `wait="3"`, "wait=5;x", "", ",,,", "wait==1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := parsePreferWait([]string{s})
		if n < 0 || n > MaxPreferWait {
			t.Fatalf("parsePreferWait(%q) = %d, outside 0..%d", s, n, MaxPreferWait)
		}
		if n > 0 && !strings.Contains(strings.ToLower(s), "wait") {
			t.Fatalf("parsePreferWait(%q) = %d without a wait preference", s, n)
		}
	})
}
