package jobs

import (
	"strings"
	"sync"
	"sync/atomic"
)

// transitionWatchers holds, per Service, a function told the text of every job UPDATE the
// service's transitions run: the golden-file test of the transition statements registers one.
// watching keeps the lookup off the transition path while nobody watches.
var (
	transitionWatchers sync.Map // *Service -> func(label, query string)
	watching           atomic.Bool
)

// watchTransitions makes every transition of s tell f its label and statement text, until the
// returned function is called.
func watchTransitions(s *Service, f func(label, query string)) (stop func()) {
	transitionWatchers.Store(s, f)
	watching.Store(true)
	return func() { transitionWatchers.Delete(s) }
}

// sawTransition tells s's watcher, if it has one, the statement query that ch runs.
func sawTransition(s *Service, ch change, query string) {
	if !watching.Load() {
		return
	}
	if f, ok := transitionWatchers.Load(s); ok {
		f.(func(string, string))(ch.label(), query)
	}
}

// label names the transition ch makes: its states, and whether it needs the worker's claim and
// reads the prompt.
func (ch change) label() string {
	from := make([]string, len(ch.from))
	for i, f := range ch.from {
		from[i] = string(f)
	}
	l := strings.Join(from, ", ") + " -> " + string(ch.to)
	if ch.claim != "" {
		l += " (under the claim)"
	}
	if ch.prompt {
		l += " (with the prompt)"
	}
	return l
}
