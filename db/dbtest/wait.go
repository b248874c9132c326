package dbtest

import (
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms until it holds, and fails the test when timeout passes first.
// It is the one wait of the project's tests: a test waits on a condition the code makes true
// (a row's state, a counter, a signal), never for a length of time, and the timeout only bounds
// how long a broken build takes to fail. It lives here, below every package that has tests, so
// that the packages jobstest cannot be imported by (jobs' own parts) use the same one.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitForDetail(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// WaitForDetail is WaitFor for a condition that can tell why it does not hold yet (the last
// error, the counts it saw): the detail of its last call goes into the failure message.
func WaitForDetail(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if detail != "" {
				t.Fatalf("timed out after %s waiting for %s (%s)", timeout, what, detail)
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
