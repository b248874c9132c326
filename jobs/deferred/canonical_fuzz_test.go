package deferred

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"
)

// FuzzCanonicalJSON: the one-pass rewrite gives, for any input, exactly what decoding the input
// into a tree and writing the tree back with sorted keys gives, or fails where that fails.
// Entry digests are computed from these bytes, so a difference would break every chain
// recorded before it.
func FuzzCanonicalJSON(f *testing.F) {
	for _, seed := range []string{
		` { "b" : 1 , "a" : [ 3 , { "d":null, "c":true } ] } `,
		`{"n":1.50,"e":-1E+3,"big":123456789012345678901234567890,"z":-0}`,
		`"<a&b>\u2028\ud800"`,
		`{"é":1,"z":2,"Z":3,"":4,"\u00e9":5}`,
		`{"a":1,"a":{"x":[]},"b":[{"a":1,"a":2}]}`,
		`{"s":"tab\there \"quoted\" back\\slash \u0001 ctl","k\n":"v"}`,
		`[[],{},[{}],"",0,false,null]`,
		"{\"bad\":\"\xff\xfe\"}",
		`{} {}`, `{`, ``, `[1,]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantErr := canonicalByTree(json.RawMessage(in))
		got, err := CanonicalJSON(json.RawMessage(in))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("CanonicalJSON(%q): error %v, the tree gives %v", in, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("CanonicalJSON(%q) = %q, the tree gives %q", in, got, want)
		}
	})
}

// canonicalByTree is the definition CanonicalJSON follows, written the plain way: decode into a
// tree (numbers as json.Number, so their text is kept), write the tree back with sorted keys.
func canonicalByTree(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the top-level value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, tree); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeCanonical writes one decoded JSON value canonically.
func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		buf.WriteString(x.String())
	case string:
		writeString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("unexpected decoded type %T", v)
	}
	return nil
}

// FuzzEntryDigest: the digest written directly equals the digest of the canonical JSON of the
// entry's fields as a map, the definition, for any status and digests (a verified chain may
// hold anything an edit put there).
func FuzzEntryDigest(f *testing.F) {
	f.Add(int64(1), "pending", int64(1779098400), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", GenesisDigest)
	f.Add(int64(-7), "<\"odd\"\u2028\x01é>", int64(-62135596800), "", "\xff")
	f.Fuzz(func(t *testing.T, seq int64, status string, unix int64, doc, prev string) {
		e := HistoryEntry{Seq: seq, Status: Status(status), At: time.Unix(unix%(1<<35), 0).UTC(), DocDigest: doc, PrevDigest: prev}
		byMap, err := canonicalByTree(map[string]any{"v": historyEntryVersion, "seq": e.Seq, "status": status,
			"at": FormatTime(e.At), "doc_digest": doc, "prev_digest": prev})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := entryDigest(e), Digest(byMap); got != want {
			t.Fatalf("entryDigest(%+v) = %s, the canonical map gives %s", e, got, want)
		}
	})
}
