package handlers

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/a-h/templ"
)

// chunkWriter records the size of every write it gets.
type chunkWriter struct {
	bytes.Buffer
	writes []int
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.Buffer.Write(p)
}

// A segmented page reads and writes back exactly the bytes written and the markup kept, in
// order, in writes of at most pageScratchSize however small its pieces.
func TestPageSegmentsKeepOrderAndWriteInLargePieces(t *testing.T) {
	t.Parallel()
	p := &pageSegments{}
	var want strings.Builder
	for i := range 300 {
		own := strings.Repeat(string(rune('a'+i%26)), 1+i%97)
		_, _ = p.WriteString(own)
		want.WriteString(own)
		if i%3 == 0 {
			ref := strings.Repeat(string(rune('A'+i%26)), 3000+i)
			p.KeepMarkup(ref)
			want.WriteString(ref)
		}
		if i%7 == 0 {
			p.KeepMarkup("<kept>") // two refs in a row
			want.WriteString("<kept>")
		}
	}
	if p.size != want.Len() {
		t.Fatalf("size %d, want %d", p.size, want.Len())
	}
	w := &chunkWriter{}
	n, err := (&pageReader{p: p}).WriteTo(w)
	if err != nil || int(n) != want.Len() || w.String() != want.String() {
		t.Fatalf("WriteTo wrote %d bytes (%v), want the page's %d in order", n, err, want.Len())
	}
	if len(w.writes) > want.Len()/pageScratchSize+1 {
		t.Errorf("WriteTo made %d writes for %d bytes, want at most %d", len(w.writes), want.Len(), want.Len()/pageScratchSize+1)
	}
	for _, s := range w.writes {
		if s > pageScratchSize {
			t.Errorf("a write of %d bytes, over %d", s, pageScratchSize)
		}
	}
	if err := iotest.TestReader(&pageReader{p: p}, []byte(want.String())); err != nil {
		t.Errorf("Read: %v", err)
	}
	// WriteTo after some Read sends the rest.
	r := &pageReader{p: p}
	head := make([]byte, 5000)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	if _, err := r.WriteTo(&rest); err != nil || string(head)+rest.String() != want.String() {
		t.Errorf("Read then WriteTo gave another page (%v)", err)
	}
}

// A templ component renders into a page with the markup of views kept by reference, in place.
func TestPageSegmentsUnderTempl(t *testing.T) {
	t.Parallel()
	comp := templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		_, _ = io.WriteString(w, "<main>")
		return templ.Raw("<p>raw</p>").Render(ctx, w)
	})
	p := &pageSegments{}
	if err := comp.Render(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := (&pageReader{p: p}).WriteTo(&got); err != nil || got.String() != "<main><p>raw</p>" {
		t.Errorf("got %q (%v)", got.String(), err)
	}
}
