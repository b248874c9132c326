package deferred

import (
	"errors"
	"fmt"
)

// ErrCancelSurface reports a break of the cancel rule: a non-terminal
// operation carries exactly one of cancel_href and cancel/unavailable-reason
// (a non-empty string), never both and never neither, and a terminal status
// document carries neither.
var ErrCancelSurface = errors.New("deferred: exactly one of cancel_href and cancel/unavailable-reason is required")

// Cancel is the cancellation surface of a non-terminal operation: either an
// href that cancels it or the reason it cannot be cancelled. Its fields are
// unexported so that "both" cannot be built; the zero Cancel is "neither" and
// is refused by Validate and by every marshaller in this package.
type Cancel struct {
	href   string
	reason string
}

// Cancelable returns the surface of an operation that href cancels.
func Cancelable(href string) Cancel { return Cancel{href: href} }

// NotCancelable returns the surface of an operation that cannot be cancelled,
// with the reason shown to callers as cancel/unavailable-reason.
func NotCancelable(reason string) Cancel { return Cancel{reason: reason} }

// IsCancelable reports whether c carries a cancel href.
func (c Cancel) IsCancelable() bool { return c.href != "" }

// IsZero reports whether c is the zero Cancel, which satisfies neither side
// of the rule.
func (c Cancel) IsZero() bool { return c == Cancel{} }

// Href returns the cancel href, or "" when the operation is not cancelable.
func (c Cancel) Href() string { return c.href }

// UnavailableReason returns the reason the operation cannot be cancelled, or
// "" when it is cancelable.
func (c Cancel) UnavailableReason() string { return c.reason }

// Validate returns nil when c holds exactly one valid surface, and otherwise
// an error wrapping ErrCancelSurface.
func (c Cancel) Validate() error {
	switch {
	case c.href != "" && c.reason != "":
		return fmt.Errorf("%w: both are present", ErrCancelSurface)
	case c.href == "" && c.reason == "":
		return fmt.Errorf("%w: neither is present", ErrCancelSurface)
	case c.href != "":
		if err := checkHref(c.href); err != nil {
			return fmt.Errorf("%w: cancel_href: %v", ErrCancelSurface, err)
		}
	default:
		if err := checkText(c.reason); err != nil {
			return fmt.Errorf("%w: cancel/unavailable-reason: %v", ErrCancelSurface, err)
		}
	}
	return nil
}

// String describes c for logs.
func (c Cancel) String() string {
	switch {
	case c.href != "":
		return "cancelable via " + c.href
	case c.reason != "":
		return "not cancelable: " + c.reason
	}
	return "no cancel surface"
}

// cancelFromWire builds a Cancel from the two optional wire keys, refusing
// both and neither.
func cancelFromWire(href, reason *string) (Cancel, error) {
	switch {
	case href != nil && reason != nil:
		return Cancel{}, fmt.Errorf("%w: both are present", ErrCancelSurface)
	case href != nil:
		c := Cancelable(*href)
		return c, c.Validate()
	case reason != nil:
		c := NotCancelable(*reason)
		return c, c.Validate()
	}
	return Cancel{}, fmt.Errorf("%w: neither is present", ErrCancelSurface)
}

// wire returns the two optional wire keys of c.
func (c Cancel) wire() (href, reason *string) {
	if c.href != "" {
		h := c.href
		href = &h
	}
	if c.reason != "" {
		r := c.reason
		reason = &r
	}
	return href, reason
}
