package provider

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseDirectives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want Directives
	}{
		{"no directives", "  What is\tthe\nanswer? ", Directives{Prompt: "What is the answer?"}},
		{"empty", "", Directives{}},
		{"latency", "hi #sim:latency=250ms there", Directives{Latency: 250 * time.Millisecond, HasLatency: true, Prompt: "hi there"}},
		{"zero latency", "#sim:latency=0s", Directives{HasLatency: true}},
		{"compound latency", "#sim:latency=1m2.5s", Directives{Latency: 62500 * time.Millisecond, HasLatency: true}},
		{"fail all attempts", "#sim:fail=provider_5xx go", Directives{FailKind: KindProvider5xx, Prompt: "go"}},
		{"fail first two", "go #sim:fail=timeout:2", Directives{FailKind: KindTimeout, FailAttempts: 2, Prompt: "go"}},
		{"every kind parses", "#sim:fail=unknown:1", Directives{FailKind: KindUnknown, FailAttempts: 1}},
		{"rate limit with retry after", "#sim:fail=rate_limit:1 #sim:retry_after=3", Directives{FailKind: KindRateLimit, FailAttempts: 1, RetryAfter: 3 * time.Second, HasRetryAfter: true}},
		{"retry after alone is accepted", "#sim:retry_after=0", Directives{HasRetryAfter: true}},
		{"retry after at the cap", "#sim:retry_after=60", Directives{RetryAfter: MaxSimRetryAfter, HasRetryAfter: true}},
		{"retry after past the cap", "#sim:retry_after=61", Directives{RetryAfter: MaxSimRetryAfter, HasRetryAfter: true}},
		{"retry after of centuries", "#sim:retry_after=9000000000", Directives{RetryAfter: MaxSimRetryAfter, HasRetryAfter: true}},
		{"retry after past a time.Duration", "#sim:retry_after=9999999999999", Directives{RetryAfter: MaxSimRetryAfter, HasRetryAfter: true}},
		{"retry after past an int64", "#sim:retry_after=99999999999999999999999", Directives{RetryAfter: MaxSimRetryAfter, HasRetryAfter: true}},
		{"hang", "wait #sim:hang", Directives{Hang: true, Prompt: "wait"}},
		{"mid-word directive keeps the prefix", "see:#sim:hang", Directives{Hang: true, Prompt: "see:"}},
		{"all together", "#sim:hang #sim:latency=1s #sim:fail=auth #sim:retry_after=9 x",
			Directives{Hang: true, Latency: time.Second, HasLatency: true, FailKind: KindAuth, RetryAfter: 9 * time.Second, HasRetryAfter: true, Prompt: "x"}},
		{"not a directive without colon", "#sim hang #simlatency=1s", Directives{Prompt: "#sim hang #simlatency=1s"}},
		{"case sensitive prefix", "#SIM:hang", Directives{Prompt: "#SIM:hang"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDirectives(tt.text)
			if err != nil {
				t.Fatalf("ParseDirectives(%q): %v", tt.text, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseDirectives(%q) =\n %+v, want\n %+v", tt.text, got, tt.want)
			}
		})
	}
}

func TestParseDirectivesInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, wantInError string
	}{
		{"unknown kind", "#sim:fail=stuck", `"#sim:fail=stuck"`},
		{"misspelled kind", "x #sim:fail=rate-limit", "unknown error kind"},
		{"empty kind", "#sim:fail=", "unknown error kind"},
		{"zero attempts", "#sim:fail=timeout:0", "less than 1"},
		{"negative attempts", "#sim:fail=timeout:-2", "less than 1"},
		{"empty attempts", "#sim:fail=timeout:", "bad attempt count"},
		{"non-numeric attempts", "#sim:fail=timeout:two", "bad attempt count"},
		{"bad duration", "#sim:latency=fast", "bad latency"},
		{"duration without unit", "#sim:latency=5", "bad latency"},
		{"negative duration", "#sim:latency=-1s", "negative"},
		{"trailing punctuation", "#sim:latency=2s.", "bad latency"},
		{"missing value", "#sim:latency", "needs a value"},
		{"fail without value", "#sim:fail", "needs a value"},
		{"bad retry after", "#sim:retry_after=1.5", "bad retry_after"},
		{"negative retry after", "#sim:retry_after=-1", "bad retry_after"},
		{"signed retry after", "#sim:retry_after=+5", "bad retry_after"},
		{"hang with value", "#sim:hang=1", "takes no value"},
		{"unknown directive", "#sim:explode", "unknown directive"},
		{"unknown directive with value", "#sim:fial=timeout", "unknown directive"},
		{"empty directive", "#sim:", "unknown directive"},
		{"duplicate", "#sim:latency=1s #sim:latency=2s", "more than once"},
		{"duplicate hang", "#sim:hang #sim:hang", "more than once"},
		{"two glued directives", "#sim:hang#sim:latency=1s", "unknown directive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := ParseDirectives(tt.text)
			if err == nil {
				t.Fatalf("ParseDirectives(%q) = %+v, want an error", tt.text, d)
			}
			if !strings.Contains(err.Error(), tt.wantInError) || !strings.Contains(err.Error(), "invalid sim directive") {
				t.Errorf("error %q does not contain %q", err, tt.wantInError)
			}
			if !reflect.DeepEqual(d, Directives{}) {
				t.Errorf("failed parse returned %+v, want zero Directives", d)
			}
		})
	}
}

func TestParseDirectivesQuotesLongDirectiveBriefly(t *testing.T) {
	t.Parallel()
	_, err := ParseDirectives("#sim:latency=" + strings.Repeat("é", 500))
	if err == nil {
		t.Fatal("want an error")
	}
	if len(err.Error()) > 300 {
		t.Errorf("error is %d bytes long, want a short quote", len(err.Error()))
	}
}

func TestDirectivesFailsAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		d       Directives
		attempt int
		want    bool
	}{
		{"no failure", Directives{}, 1, false},
		{"all attempts, first", Directives{FailKind: KindParse}, 1, true},
		{"all attempts, tenth", Directives{FailKind: KindParse}, 10, true},
		{"first two, attempt 2", Directives{FailKind: KindParse, FailAttempts: 2}, 2, true},
		{"first two, attempt 3", Directives{FailKind: KindParse, FailAttempts: 2}, 3, false},
		{"attempt 0 counts as 1", Directives{FailKind: KindParse, FailAttempts: 1}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.d.FailsAttempt(tt.attempt); got != tt.want {
				t.Errorf("FailsAttempt(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestDirectivesString(t *testing.T) {
	t.Parallel()
	d := Directives{Latency: 1500 * time.Millisecond, HasLatency: true, FailKind: KindRateLimit, FailAttempts: 2, RetryAfter: 4 * time.Second, HasRetryAfter: true, Hang: true}
	const want = "#sim:latency=1.5s #sim:fail=rate_limit:2 #sim:retry_after=4 #sim:hang"
	if got := d.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Directives{Prompt: "ignored"}).String(); got != "" {
		t.Errorf("empty Directives String() = %q", got)
	}
}

func TestTruncateUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 10, "abcdefghij"},
		{"abcdefghijk", 10, "abcdefg…"},
		{"ééééé", 7, "éé…"},
		{"abcdef", 2, "ab"},
	}
	for _, tt := range tests {
		got := truncateUTF8(tt.s, tt.n)
		if got != tt.want || len(got) > max(tt.n, len(tt.s)) {
			t.Errorf("truncateUTF8(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// FuzzParseDirectives checks that no prompt makes ParseDirectives panic,
// and that every successful parse gives sensible values that survive a
// round trip through String.
func FuzzParseDirectives(f *testing.F) {
	for _, seed := range []string{
		"",
		"plain prompt",
		"#sim:latency=2s hello",
		"#sim:fail=rate_limit:2 #sim:retry_after=5",
		"#sim:hang",
		"a#sim:fail=timeout b",
		"#sim:fail=nope",
		"#sim:latency=-1s",
		"#sim:latency=9223372036854775807ns #sim:retry_after=9223372036",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		d, err := ParseDirectives(text)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid sim directive") {
				t.Fatalf("error %q does not say it is a directive error", err)
			}
			return
		}
		if d.Latency < 0 || (!d.HasLatency && d.Latency != 0) {
			t.Fatalf("bad latency %v (has %v)", d.Latency, d.HasLatency)
		}
		if d.FailKind != "" && !d.FailKind.Valid() {
			t.Fatalf("invalid fail kind %q", d.FailKind)
		}
		if d.FailAttempts < 0 || (d.FailKind == "" && d.FailAttempts != 0) {
			t.Fatalf("bad fail attempts %d for kind %q", d.FailAttempts, d.FailKind)
		}
		if d.RetryAfter < 0 || d.RetryAfter%time.Second != 0 || (!d.HasRetryAfter && d.RetryAfter != 0) {
			t.Fatalf("bad retry after %v (has %v)", d.RetryAfter, d.HasRetryAfter)
		}
		if strings.Contains(d.Prompt, DirectivePrefix) {
			t.Fatalf("prompt %q still holds a directive", d.Prompt)
		}
		if d.Prompt != strings.Join(strings.Fields(d.Prompt), " ") {
			t.Fatalf("prompt %q is not whitespace-normalised", d.Prompt)
		}

		again, err := ParseDirectives(d.String())
		if err != nil {
			t.Fatalf("String() = %q does not parse: %v", d.String(), err)
		}
		want := d
		want.Prompt = ""
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("round trip of %q:\n got %+v\nwant %+v", d.String(), again, want)
		}
		plain, err := ParseDirectives(d.Prompt)
		if err != nil || !reflect.DeepEqual(plain, Directives{Prompt: d.Prompt}) {
			t.Fatalf("stripped prompt %q parses as %+v, %v", d.Prompt, plain, err)
		}
	})
}
