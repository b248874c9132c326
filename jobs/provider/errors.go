package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ErrorKind classifies a provider failure; the retry rules of package jobs go by it.
type ErrorKind string

// The error kinds a provider can report. The job runner adds worker_crash,
// stuck and expired on its own; a provider never returns those.
const (
	// KindTimeout is an adapter or transport timeout. Retryable.
	KindTimeout ErrorKind = "timeout"
	// KindRateLimit is an HTTP 429 from the provider. Retryable after
	// RetryAfter when the provider sent one.
	KindRateLimit ErrorKind = "rate_limit"
	// KindProvider5xx is an HTTP 5xx from the provider. Retryable.
	KindProvider5xx ErrorKind = "provider_5xx"
	// KindProvider4xx is an HTTP 4xx other than 401, 403 and 429, or a
	// malformed request such as a bad sim directive. Not retryable.
	KindProvider4xx ErrorKind = "provider_4xx"
	// KindParse is a response body that could not be understood. Not
	// retryable.
	KindParse ErrorKind = "parse"
	// KindAuth is a credential the provider rejected (401 or 403). Not
	// retryable; it needs an operator.
	KindAuth ErrorKind = "auth"
	// KindUnknown is every other failure, including connection errors and
	// cancellation. Retryable, as the conservative default.
	KindUnknown ErrorKind = "unknown"
)

// Kinds lists every kind a provider can return, in a fixed order.
func Kinds() []ErrorKind {
	return []ErrorKind{KindTimeout, KindRateLimit, KindProvider5xx, KindProvider4xx, KindParse, KindAuth, KindUnknown}
}

// ParseErrorKind returns the provider error kind spelled s, or an error when
// s is not one of the kinds listed by Kinds.
func ParseErrorKind(s string) (ErrorKind, error) {
	for _, k := range Kinds() {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown error kind %q (want one of %s)", s, kindList())
}

func kindList() string {
	names := make([]string, 0, len(Kinds()))
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// Valid reports whether k is one of the kinds listed by Kinds.
func (k ErrorKind) Valid() bool {
	_, err := ParseErrorKind(string(k))
	return err == nil
}

// Retryable reports whether the retry rules allow another attempt after a failure of
// kind k: timeout, rate_limit, provider_5xx and unknown are retryable;
// provider_4xx, parse and auth are not. A kind that is not valid is treated
// as unknown and so is retryable.
func (k ErrorKind) Retryable() bool {
	switch k {
	case KindProvider4xx, KindParse, KindAuth:
		return false
	default:
		return true
	}
}

// Error is the typed failure every provider returns.
//
// Message is a short, human-readable description that is safe to store and
// show to the prompt's owner: it never contains credentials. StatusCode is
// the provider's HTTP status, or 0 when there was no HTTP answer.
// RetryAfter is meaningful only when HasRetryAfter is true. Err is the
// underlying cause, if any.
type Error struct {
	Kind          ErrorKind
	Message       string
	StatusCode    int
	RetryAfter    time.Duration
	HasRetryAfter bool
	Err           error
	// Limits are the provider's rate-limit figures sent with the failure, if any.
	Limits Limits
	// Partial is what an attempt that failed or was cut mid-answer had produced: the text
	// already passed to Request.Output and its usage so far. Zero when nothing came.
	Partial Partial
}

// Partial is the output of an attempt that ended before its answer did.
type Partial struct {
	// Text is the concatenation of the pieces passed to Request.Output.
	Text string
	// PromptTokens is the provider's input token count, or an estimate when it sent none.
	PromptTokens int
	// CompletionTokens counts the output produced so far: the provider's count when it sent
	// one, otherwise one per content piece received (a streamed piece is about one token).
	CompletionTokens int
}

// Error formats the failure as "provider <kind>[ (HTTP <status>)]: <message>[: <cause>]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("provider ")
	b.WriteString(string(e.Kind))
	if e.StatusCode != 0 {
		b.WriteString(" (HTTP ")
		b.WriteString(strconv.Itoa(e.StatusCode))
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		if cause := e.Err.Error(); cause != "" && !strings.Contains(e.Message, cause) {
			b.WriteString(": ")
			b.WriteString(cause)
		}
	}
	return b.String()
}

// Unwrap returns the underlying cause, so errors.Is and errors.As see
// through an *Error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the failure's kind allows another attempt.
func (e *Error) Retryable() bool { return e.Kind.Retryable() }

// Classify returns the *Error for any error from Complete: an *Error (found
// with errors.As) as is; context.DeadlineExceeded or a net.Error reporting a
// timeout becomes KindTimeout; anything else becomes KindUnknown. A
// context.Canceled error is returned as KindUnknown, and IsCanceled reports
// it so that callers can tell a cancellation from a failure. Classify
// returns nil for a nil error.
func Classify(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	if isTimeout(err) {
		return &Error{Kind: KindTimeout, Message: "request timed out", Err: err}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Kind: KindUnknown, Message: "request cancelled", Err: err}
	}
	return &Error{Kind: KindUnknown, Message: "request failed", Err: err}
}

// IsCanceled reports whether err is, or wraps, context.Canceled: the caller
// abandoned the call, so the failure says nothing about the provider.
func IsCanceled(err error) bool {
	return errors.Is(err, context.Canceled)
}

// isTimeout reports whether err is a deadline or a network timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// contextError turns the error of an operation that ended because ctx (or a
// context derived from it) was done into an *Error: a deadline becomes
// KindTimeout and a cancellation KindUnknown wrapping context.Canceled.
// what names the interrupted operation for the message.
func contextError(ctx context.Context, what string, err error) *Error {
	ctxErr := ctx.Err()
	switch {
	case errors.Is(ctxErr, context.Canceled) || (ctxErr == nil && errors.Is(err, context.Canceled)):
		return &Error{Kind: KindUnknown, Message: what + " cancelled", Err: wrapWith(context.Canceled, err)}
	case errors.Is(ctxErr, context.DeadlineExceeded) || isTimeout(err):
		return &Error{Kind: KindTimeout, Message: what + " timed out", Err: wrapWith(context.DeadlineExceeded, err)}
	default:
		return &Error{Kind: KindUnknown, Message: what + " failed", Err: err}
	}
}

// wrapWith returns err when it already wraps target, and otherwise an error
// that wraps both target and err.
func wrapWith(target, err error) error {
	if err == nil {
		return target
	}
	if errors.Is(err, target) {
		return err
	}
	return fmt.Errorf("%w: %w", target, err)
}
