package handlers

import (
	"context"
	"io"
	"sync"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
)

// pageScratchSize is the size of the writes a segmented page is sent in.
const pageScratchSize = 64 << 10

// pageScratch holds the buffers pageSegments.WriteTo gathers its pieces in.
var pageScratch = sync.Pool{New: func() any { b := make([]byte, pageScratchSize); return &b }}

// pageSegments is a rendered page: the bytes the renderer wrote, with markup kept by reference
// between them (views.MarkupKeeper), so that a page of cached drops holds only its own bytes.
type pageSegments struct {
	own  []byte
	refs []pageRef
	size int
}

// pageRef is markup kept by reference, to be written where own had reached at.
type pageRef struct {
	at int
	s  string
}

// Write appends b to the page.
func (p *pageSegments) Write(b []byte) (int, error) {
	p.own = append(p.own, b...)
	p.size += len(b)
	return len(b), nil
}

// WriteString appends s to the page.
func (p *pageSegments) WriteString(s string) (int, error) {
	p.own = append(p.own, s...)
	p.size += len(s)
	return len(s), nil
}

// KeepMarkup appends s to the page by reference.
func (p *pageSegments) KeepMarkup(s string) {
	p.refs = append(p.refs, pageRef{at: len(p.own), s: s})
	p.size += len(s)
}

// pieces calls f with each piece of the page in order, as bytes or as a string, until f fails.
func (p *pageSegments) pieces(f func(b []byte, s string) error) error {
	from := 0
	for _, r := range p.refs {
		if r.at > from {
			if err := f(p.own[from:r.at], ""); err != nil {
				return err
			}
			from = r.at
		}
		if err := f(nil, r.s); err != nil {
			return err
		}
	}
	if from < len(p.own) {
		return f(p.own[from:], "")
	}
	return nil
}

// pageReader reads a pageSegments from the start.
type pageReader struct {
	p   *pageSegments
	off int // bytes of the page already read
}

// Read copies the next bytes of the page into b.
func (r *pageReader) Read(b []byte) (int, error) {
	if r.off >= r.p.size {
		return 0, io.EOF
	}
	n, pos := 0, 0
	_ = r.p.pieces(func(pb []byte, ps string) error {
		l := len(pb) + len(ps)
		if pos+l <= r.off {
			pos += l
			return nil
		}
		skip := max(r.off-pos, 0)
		var c int
		if pb != nil {
			c = copy(b[n:], pb[skip:])
		} else {
			c = copy(b[n:], ps[skip:])
		}
		n += c
		pos += l
		if n == len(b) {
			return io.EOF // b is full: stop walking
		}
		return nil
	})
	r.off += n
	return n, nil
}

// WriteTo writes the rest of the page to w in writes of up to pageScratchSize bytes, however
// small its pieces: a page streamed in 4 KiB pieces costs a system call for each.
func (r *pageReader) WriteTo(w io.Writer) (int64, error) {
	bp := pageScratch.Get().(*[]byte)
	defer pageScratch.Put(bp)
	scratch := (*bp)[:0]
	var written int64
	flush := func() error {
		if len(scratch) == 0 {
			return nil
		}
		n, err := w.Write(scratch)
		written += int64(n)
		scratch = scratch[:0]
		return err
	}
	pos := 0
	err := r.p.pieces(func(pb []byte, ps string) error {
		l := len(pb) + len(ps)
		skip := max(r.off-pos, 0)
		pos += l
		if skip >= l {
			return nil
		}
		for skip < l {
			if len(scratch) == cap(scratch) {
				if err := flush(); err != nil {
					return err
				}
			}
			var c int
			if pb != nil {
				c = copy(scratch[len(scratch):cap(scratch)], pb[skip:])
			} else {
				c = copy(scratch[len(scratch):cap(scratch)], ps[skip:])
			}
			scratch = scratch[:len(scratch)+c]
			skip += c
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	r.off = r.p.size
	return written, err
}

// renderSegmented renders comp into the body before the handler returns, with a length, so
// that it is sent in a few large writes. Markup the page keeps by reference (cached drops) is
// not copied until it is sent, so a page made of them holds little memory of its own.
func renderSegmented(ctx context.Context, c *fiber.Ctx, comp templ.Component) error {
	p := &pageSegments{own: make([]byte, 0, 32<<10)}
	if err := comp.Render(ctx, p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Context().SetBodyStream(&pageReader{p: p}, p.size)
	return nil
}
