package deferred

import (
	"errors"
	"testing"
	"time"
)

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	if p.MaxTTL != 15*time.Minute || p.DefaultTTL != 15*time.Minute || p.MinRetryAfter != 1 || p.MaxRetryAfter != 60 {
		t.Fatalf("DefaultPolicy() = %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultPolicy().Validate() = %v", err)
	}
	if err := (Policy{}).Validate(); err != nil {
		t.Fatalf("Policy{}.Validate() = %v", err)
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := map[string]Policy{
		"negative max":           {MaxTTL: -time.Second},
		"negative default":       {DefaultTTL: -time.Second},
		"default above max":      {MaxTTL: 5 * time.Minute, DefaultTTL: 6 * time.Minute},
		"default above max(15m)": {DefaultTTL: 16 * time.Minute},
		"min retry negative":     {MinRetryAfter: -1},
		"min retry above 60":     {MinRetryAfter: 61, MaxRetryAfter: 60},
		"max retry above 60":     {MaxRetryAfter: 61},
		"max retry negative":     {MaxRetryAfter: -5},
		"min retry above max":    {MinRetryAfter: 10, MaxRetryAfter: 5},
	}
	for name, p := range bad {
		if err := p.Validate(); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidPolicy", name, err)
		}
	}
	good := map[string]Policy{
		"longer deployment max": {MaxTTL: time.Hour, DefaultTTL: 10 * time.Minute},
		"shorter max":           {MaxTTL: time.Minute},
		"fixed retry":           {MinRetryAfter: 5, MaxRetryAfter: 5},
	}
	for name, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v", name, err)
		}
	}
}

func TestClampTTL(t *testing.T) {
	def := DefaultPolicy()
	custom := Policy{MaxTTL: time.Hour, DefaultTTL: 10 * time.Minute}
	short := Policy{MaxTTL: 2 * time.Minute} // DefaultTTL follows MaxTTL
	broken := Policy{MaxTTL: time.Minute, DefaultTTL: time.Hour}
	cases := []struct {
		name string
		p    Policy
		in   time.Duration
		want time.Duration
	}{
		{"zero gives default", def, 0, 15 * time.Minute},
		{"negative gives default", def, -time.Second, 15 * time.Minute},
		{"shorter kept", def, 30 * time.Second, 30 * time.Second},
		{"exactly max kept", def, 15 * time.Minute, 15 * time.Minute},
		{"longer clamped", def, 16 * time.Minute, 15 * time.Minute},
		{"huge clamped", def, 1<<63 - 1, 15 * time.Minute},
		{"one nanosecond kept", def, 1, 1},
		{"zero policy is default", Policy{}, 0, 15 * time.Minute},
		{"zero policy clamps", Policy{}, time.Hour, 15 * time.Minute},
		{"deployment max allows more", custom, 45 * time.Minute, 45 * time.Minute},
		{"deployment max clamps", custom, 2 * time.Hour, time.Hour},
		{"deployment default", custom, 0, 10 * time.Minute},
		{"default follows short max", short, 0, 2 * time.Minute},
		{"misconfigured default still clamped", broken, 0, time.Minute},
	}
	for _, c := range cases {
		if got := c.p.ClampTTL(c.in); got != c.want {
			t.Errorf("%s: ClampTTL(%v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
}

func TestClampRetryAfter(t *testing.T) {
	def := DefaultPolicy()
	narrow := Policy{MinRetryAfter: 5, MaxRetryAfter: 10}
	broken := Policy{MinRetryAfter: 100, MaxRetryAfter: 200}
	cases := []struct {
		name string
		p    Policy
		in   int
		want int
	}{
		{"zero gives min", def, 0, 1},
		{"negative gives min", def, -7, 1},
		{"one kept", def, 1, 1},
		{"two kept", def, 2, 2},
		{"sixty kept", def, 60, 60},
		{"sixty-one clamped", def, 61, 60},
		{"huge clamped", def, 1 << 40, 60},
		{"zero policy", Policy{}, 90, 60},
		{"narrow below", narrow, 2, 5},
		{"narrow inside", narrow, 7, 7},
		{"narrow above", narrow, 30, 10},
		{"narrow zero", narrow, 0, 5},
		{"misconfigured still within contract", broken, 1, 60},
	}
	for _, c := range cases {
		if got := c.p.ClampRetryAfter(c.in); got != c.want {
			t.Errorf("%s: ClampRetryAfter(%d) = %d, want %d", c.name, c.in, got, c.want)
		}
	}
}
