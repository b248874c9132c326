package deferred

import (
	"errors"
	"testing"
)

func TestCancelRule(t *testing.T) {
	ok := []Cancel{
		Cancelable("/sa-core/v1/deferred-operations/x/cancel"),
		Cancelable("https://node.example/cancel"),
		NotCancelable("the provider call is already in flight"),
	}
	for _, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("%v: Validate() = %v", c, err)
		}
		href, reason := c.wire()
		if (href == nil) == (reason == nil) {
			t.Errorf("%v: wire() gives both or neither", c)
		}
	}
	bad := []Cancel{
		{},
		Cancelable(""),
		NotCancelable(""),
		Cancelable(`\\host\share`),
		NotCancelable("\xff\xfe"),
		{href: "/a", reason: "b"}, // impossible outside the package
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrCancelSurface) {
			t.Errorf("%#v: Validate() = %v, want ErrCancelSurface", c, err)
		}
	}
	if !(Cancel{}).IsZero() || Cancelable("/a").IsZero() {
		t.Error("IsZero is wrong")
	}
	if !Cancelable("/a").IsCancelable() || NotCancelable("r").IsCancelable() {
		t.Error("IsCancelable is wrong")
	}
	if Cancelable("/a").Href() != "/a" || NotCancelable("r").UnavailableReason() != "r" {
		t.Error("accessors are wrong")
	}
}

func TestCancelFromWire(t *testing.T) {
	s := func(v string) *string { return &v }
	if _, err := cancelFromWire(nil, nil); !errors.Is(err, ErrCancelSurface) {
		t.Errorf("neither: %v", err)
	}
	if _, err := cancelFromWire(s("/a"), s("r")); !errors.Is(err, ErrCancelSurface) {
		t.Errorf("both: %v", err)
	}
	if _, err := cancelFromWire(nil, s("")); !errors.Is(err, ErrCancelSurface) {
		t.Errorf("empty reason: %v", err)
	}
	if c, err := cancelFromWire(s("/a"), nil); err != nil || c.Href() != "/a" {
		t.Errorf("href: %v %v", c, err)
	}
	if c, err := cancelFromWire(nil, s("r")); err != nil || c.UnavailableReason() != "r" {
		t.Errorf("reason: %v %v", c, err)
	}
}
