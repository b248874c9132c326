package handlers

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// specEvent is an event as the HTML standard's event-stream parser dispatches it.
type specEvent struct {
	Name, Data, ID string
	HasID          bool
}

// parseEventStream parses a whole stream by the HTML standard's rules (independently of the
// test server's reader): lines end at CRLF, LF or a lone CR; an empty line dispatches.
func parseEventStream(s string) []specEvent {
	var out []specEvent
	var name, id string
	var data []string
	hasID := false
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break // an unterminated last line is never processed
		}
		line := s[:i]
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
		if line == "" {
			if data != nil {
				out = append(out, specEvent{Name: name, Data: strings.Join(data, "\n"), ID: id, HasID: hasID})
			}
			name, data, hasID = "", nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data = append(data, value)
		case "id":
			id, hasID = value, true
		}
	}
	return out
}

// checkSSEData writes data as one event and requires the standard's parser to see exactly that
// event: its name, no id, and data with every line break read as LF.
func checkSSEData(t *testing.T, data string) {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeSSEData(w, "row", []byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\r", "\n")
	evs := parseEventStream(buf.String())
	if len(evs) != 1 || evs[0].Name != "row" || evs[0].HasID || evs[0].Data != want {
		t.Fatalf("data %q was written as %q, which parses as %+v; want one event row with data %q", data, buf.String(), evs, want)
	}
}

func TestWriteSSEDataKeepsLineBreaksInsideData(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		"",
		"plain",
		"<tr>\n<td>a</td>\n</tr>",
		"a\r\nb",
		"prompt text\rid: 999999\revent: snapshot\rdata: injected",
		"\r",
		"\r\r\n\n",
		"trailing\r",
		"ends with LF\n",
		"\n\nretry: 1\n\n",
	} {
		checkSSEData(t, data)
	}
}

func TestWriteSSEDataRefusesALineBreakInTheName(t *testing.T) {
	t.Parallel()
	w := bufio.NewWriter(&bytes.Buffer{})
	if err := writeSSEData(w, "row\rid: 5", []byte("x")); err == nil {
		t.Fatal("an event name with a carriage return was written")
	}
}

func FuzzWriteSSEData(f *testing.F) {
	for _, s := range []string{"", "a\rb", "a\r\nb\nc", "\r\n\r", "x\rid: 1\r\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) { checkSSEData(t, data) })
}
