package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// timeoutNetError is a net.Error that reports a timeout.
type timeoutNetError struct{}

func (timeoutNetError) Error() string   { return "i/o timeout" }
func (timeoutNetError) Timeout() bool   { return true }
func (timeoutNetError) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	t.Parallel()
	typed := &Error{Kind: KindAuth, Message: "bad key", StatusCode: 401}
	tests := []struct {
		name     string
		err      error
		want     ErrorKind
		canceled bool
		same     *Error
	}{
		{name: "typed error as is", err: typed, want: KindAuth, same: typed},
		{name: "wrapped typed error", err: fmt.Errorf("job 7: %w", typed), want: KindAuth, same: typed},
		{name: "deadline", err: context.DeadlineExceeded, want: KindTimeout},
		{name: "wrapped deadline", err: fmt.Errorf("calling: %w", context.DeadlineExceeded), want: KindTimeout},
		{name: "net timeout", err: &net.OpError{Op: "read", Net: "tcp", Err: timeoutNetError{}}, want: KindTimeout},
		{name: "os deadline", err: os.ErrDeadlineExceeded, want: KindTimeout},
		{name: "canceled", err: context.Canceled, want: KindUnknown, canceled: true},
		{name: "wrapped canceled", err: fmt.Errorf("x: %w", context.Canceled), want: KindUnknown, canceled: true},
		{name: "other", err: errors.New("boom"), want: KindUnknown},
		{name: "connection refused", err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, want: KindUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Classify(tt.err)
			if got == nil {
				t.Fatal("Classify returned nil")
			}
			if got.Kind != tt.want {
				t.Errorf("Kind = %q, want %q", got.Kind, tt.want)
			}
			if IsCanceled(tt.err) != tt.canceled || IsCanceled(got) != tt.canceled {
				t.Errorf("IsCanceled = %v/%v, want %v", IsCanceled(tt.err), IsCanceled(got), tt.canceled)
			}
			if tt.same != nil && got != tt.same {
				t.Errorf("Classify did not return the *Error itself")
			}
			if tt.same == nil && !errors.Is(got, tt.err) {
				t.Errorf("classified error does not wrap the cause")
			}
		})
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	cause := errors.New("read: connection reset by peer")
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"kind only", &Error{Kind: KindParse}, "provider parse"},
		{"status and message", &Error{Kind: KindRateLimit, StatusCode: 429, Message: "slow down"}, "provider rate_limit (HTTP 429): slow down"},
		{"cause", &Error{Kind: KindUnknown, Message: "request failed", Err: cause}, "provider unknown: request failed: read: connection reset by peer"},
		{"cause already in message", &Error{Kind: KindUnknown, Message: "x: " + cause.Error(), Err: cause}, "provider unknown: x: read: connection reset by peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
	e := &Error{Kind: KindUnknown, Err: cause}
	if !errors.Is(e, cause) || errors.Unwrap(e) != cause {
		t.Error("Unwrap does not expose the cause")
	}
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	retryable := map[ErrorKind]bool{
		KindTimeout: true, KindRateLimit: true, KindProvider5xx: true, KindUnknown: true,
		KindProvider4xx: false, KindParse: false, KindAuth: false,
	}
	if len(Kinds()) != len(retryable) {
		t.Fatalf("Kinds() has %d kinds, want %d", len(Kinds()), len(retryable))
	}
	for _, k := range Kinds() {
		if got, err := ParseErrorKind(string(k)); err != nil || got != k {
			t.Errorf("ParseErrorKind(%q) = %q, %v", k, got, err)
		}
		if !k.Valid() {
			t.Errorf("%q not Valid", k)
		}
		if k.Retryable() != retryable[k] || (&Error{Kind: k}).Retryable() != retryable[k] {
			t.Errorf("%q Retryable = %v, want %v", k, k.Retryable(), retryable[k])
		}
	}
	for _, bad := range []string{"", "stuck", "worker_crash", "expired", "TIMEOUT", "rate-limit"} {
		if _, err := ParseErrorKind(bad); err == nil {
			t.Errorf("ParseErrorKind(%q) accepted", bad)
		}
	}
}

func TestContextError(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	live := context.Background()
	other := errors.New("read tcp: use of closed network connection")
	tests := []struct {
		name     string
		ctx      context.Context
		err      error
		want     ErrorKind
		canceled bool
	}{
		{"cancelled context", canceled, other, KindUnknown, true},
		{"expired context", expired, other, KindTimeout, false},
		{"live context, timeout error", live, timeoutNetError{}, KindTimeout, false},
		{"live context, canceled error", live, context.Canceled, KindUnknown, true},
		{"live context, other error", live, other, KindUnknown, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := contextError(tt.ctx, "op", tt.err)
			if got.Kind != tt.want || IsCanceled(got) != tt.canceled {
				t.Errorf("got kind %q canceled %v, want %q %v", got.Kind, IsCanceled(got), tt.want, tt.canceled)
			}
			if !strings.HasPrefix(got.Message, "op ") {
				t.Errorf("Message %q does not name the operation", got.Message)
			}
		})
	}
}
