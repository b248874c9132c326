package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	reclaim := func(context.Context) (ReclaimReport, error) { return ReclaimReport{}, nil }
	poll := func(context.Context) error { return nil }
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"no database", Config{Reclaim: reclaim, Poll: poll, KeyTTL: time.Hour}, false},
		{"no reclaim", Config{DB: &bun.DB{}, Poll: poll, KeyTTL: time.Hour}, false},
		{"no poll", Config{DB: &bun.DB{}, Reclaim: reclaim, KeyTTL: time.Hour}, false},
		{"no key lifetime", Config{DB: &bun.DB{}, Reclaim: reclaim, Poll: poll}, false},
		{"the defaults", Config{DB: &bun.DB{}, Reclaim: reclaim, Poll: poll, KeyTTL: time.Hour}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(c.cfg)
			if (err == nil) != c.ok {
				t.Fatalf("New: %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if m.cfg.ReclaimEvery != time.Minute || m.cfg.PollEvery != 2*time.Second ||
				m.cfg.EventRetention != time.Hour || m.cfg.Logger == nil {
				t.Errorf("defaults %+v", m.cfg)
			}
			if n := len(m.PeriodicJobs()); n != 3 {
				t.Errorf("%d periodic jobs, want reclaim, poll and prune", n)
			}
		})
	}
	short, err := New(Config{DB: &bun.DB{}, Reclaim: reclaim, Poll: poll, KeyTTL: time.Hour, EventRetention: time.Minute})
	if err != nil || short.cfg.EventRetention != time.Hour {
		t.Errorf("a retention under 15 min: %v, kept %v, want the 1 h default", err, short.cfg.EventRetention)
	}
}
