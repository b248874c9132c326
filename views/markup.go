package views

import (
	"context"
	"io"

	"github.com/a-h/templ"
	templruntime "github.com/a-h/templ/runtime"
)

// MarkupKeeper is a writer that can take a string of finished markup by reference, to write it
// as it is later, instead of copying it: a page made mostly of drops rendered before (see
// MissionDrop.Markup) is then assembled without copying them.
type MarkupKeeper interface {
	io.Writer
	KeepMarkup(s string)
}

// keptMarkup writes s, markup rendered before, as it is: by reference when the page renders
// into a MarkupKeeper (directly, or under the buffer templ puts around the writer it is
// given), else copied like templ.Raw.
func keptMarkup(s string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		k, ok := w.(MarkupKeeper)
		if b, buffered := w.(*templruntime.Buffer); buffered && !ok {
			if k, ok = b.Underlying.(MarkupKeeper); ok {
				// What the page wrote before s must reach the keeper before s does.
				if err := b.Flush(); err != nil {
					return err
				}
			}
		}
		if ok {
			k.KeepMarkup(s)
			return nil
		}
		_, err := io.WriteString(w, s)
		return err
	})
}
