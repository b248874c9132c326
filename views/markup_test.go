package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// keeper is a MarkupKeeper that records what it was given, marking kept markup.
type keeper struct {
	bytes.Buffer
	kept int
}

func (k *keeper) KeepMarkup(s string) {
	k.kept++
	k.WriteString("[" + s + "]")
}

// A drop's markup rendered before is written as it is, in its place: kept by reference by a
// MarkupKeeper under templ's buffer, copied into any other writer.
func TestKeptMarkupInTheField(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := BuildMissionField([]MissionDrop{
		{PromptID: "p1", JobID: "j1", State: "succeeded", CreatedAt: at, Markup: "<article>cached one</article>"},
		{PromptID: "p2", JobID: "j2", State: "queued", CreatedAt: at.Add(time.Second)},
	}, at)
	k := &keeper{}
	if err := missionFieldContent(f, "tok").Render(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	got := k.String()
	if k.kept != 1 || !strings.Contains(got, `<section id="thread-p1" class="thread" data-created="`) ||
		!strings.Contains(got, `">[<article>cached one</article>]</section>`) {
		t.Errorf("the cached drop was not kept in its place: %s", got)
	}
	if !strings.Contains(got, `id="drop-p2"`) {
		t.Errorf("the uncached drop was not rendered: %s", got)
	}
	var plain bytes.Buffer
	if err := missionFieldContent(f, "tok").Render(context.Background(), &plain); err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(got, "[<article>cached one</article>]", "<article>cached one</article>", 1); plain.String() != want {
		t.Errorf("copied into a plain writer:\n%s\nwant\n%s", plain.String(), want)
	}
}

// excerpt's shortcut for plain text gives exactly what the general path gives.
func TestExcerptShortcutMatchesTheGeneralPath(t *testing.T) {
	t.Parallel()
	pieces := []string{"a", "word", " ", "  ", "\t", "\n", "é", "日本", "\xff", "…", "x\u00a0y", ".", "\u2028"}
	rng := uint64(1)
	next := func(n int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int((rng >> 33) % uint64(n))
	}
	cases := []string{"", " ", "   ", "plain words here", "  leading spaces", "trailing ", strings.Repeat("ab ", 100),
		strings.Repeat("é", 61), strings.Repeat("x", 59) + " y", strings.Repeat("x", 58) + " yz", strings.Repeat("x", 60) + " "}
	for range 5000 {
		var b strings.Builder
		for k := next(40); k > 0; k-- {
			b.WriteString(pieces[next(len(pieces))])
		}
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		for _, n := range []int{1, 2, 3, 10, 60, 140} {
			if got, want := excerpt(c, n), excerptRunes(c, n); got != want {
				t.Fatalf("excerpt(%q, %d) = %q, want %q", c, n, got, want)
			}
		}
	}
}
