package feed_test

import (
	"context"
	"slices"
	"sync"

	"github.com/uptrace/bun"
)

// queryLog keeps the text of every query bun ran.
type queryLog struct {
	mu sync.Mutex
	qs []string
}

func (l *queryLog) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }
func (l *queryLog) AfterQuery(_ context.Context, ev *bun.QueryEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.qs = append(l.qs, ev.Query)
}

// all is every query run so far; last, the latest.
func (l *queryLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.qs)
}

func (l *queryLog) last() string {
	qs := l.all()
	if len(qs) == 0 {
		return ""
	}
	return qs[len(qs)-1]
}
