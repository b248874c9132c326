package main

import (
	"strings"
	"testing"
	"time"
)

// TestLimitSettings: ASTERION_MAX_CONNS_PER_IP and ASTERION_STATEMENT_TIMEOUT are read when
// set, left to their defaults when not, and a bad value is an error naming the variable.
func TestLimitSettings(t *testing.T) {
	t.Parallel()
	envOf := func(m map[string]string) env { return func(k string) string { return m[k] } }
	l, err := httpLimits(envOf(nil))
	if err != nil || l.MaxConnsPerIP != 0 {
		t.Fatalf("unset: %+v %v, want the zero value (the default)", l, err)
	}
	if l, err := httpLimits(envOf(map[string]string{"ASTERION_MAX_CONNS_PER_IP": "32"})); err != nil || l.MaxConnsPerIP != 32 {
		t.Fatalf("32: %+v %v", l, err)
	}
	for _, bad := range []string{"0", "-1", "many"} {
		if _, err := httpLimits(envOf(map[string]string{"ASTERION_MAX_CONNS_PER_IP": bad})); err == nil ||
			!strings.Contains(err.Error(), "ASTERION_MAX_CONNS_PER_IP") {
			t.Errorf("ASTERION_MAX_CONNS_PER_IP=%s: %v, want an error naming it", bad, err)
		}
	}
	cm := &common{databaseURL: "postgres://postgres@127.0.0.1:5432/x"}
	if _, _, err := cm.validate(envOf(map[string]string{"ASTERION_STATEMENT_TIMEOUT": "3s"})); err != nil || cm.statementTimeout != 3*time.Second {
		t.Fatalf("ASTERION_STATEMENT_TIMEOUT=3s: %v %v", cm.statementTimeout, err)
	}
	for _, bad := range []string{"0", "-1s", "soon"} {
		cm := &common{databaseURL: "postgres://postgres@127.0.0.1:5432/x"}
		if _, _, err := cm.validate(envOf(map[string]string{"ASTERION_STATEMENT_TIMEOUT": bad})); err == nil ||
			!strings.Contains(err.Error(), "ASTERION_STATEMENT_TIMEOUT") {
			t.Errorf("ASTERION_STATEMENT_TIMEOUT=%s: %v, want an error naming it", bad, err)
		}
	}
}
