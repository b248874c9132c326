package deferred

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// CanonicalJSON returns the canonical encoding of v: what marshalling v with
// encoding/json, decoding it again (numbers kept as json.Number, so their text
// is preserved exactly) and re-encoding it with object keys sorted by their
// UTF-8 bytes, no insignificant whitespace and no HTML escaping gives, written
// in one pass over the marshalled text. Equal JSON values
// with the same number spellings give the same bytes, whatever the key order
// or spacing of the input. Pass raw JSON as json.RawMessage (a plain []byte
// is marshalled by encoding/json as a base64 string). Duplicate object keys
// keep their last value, as encoding/json does.
func CanonicalJSON(v any) ([]byte, error) {
	raw, ok := v.(json.RawMessage)
	if !ok || !json.Valid(raw) {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("deferred: canonical JSON: %w", err)
		}
	}
	// raw now holds one valid JSON value, which is rewritten in one pass instead of being
	// decoded into a tree: every status change of every operation computes this.
	c := canonicalizer{in: raw}
	out := c.value(make([]byte, 0, len(raw)))
	if c.skipSpace(); c.at != len(raw) {
		return nil, fmt.Errorf("deferred: canonical JSON: data after the top-level value")
	}
	return out, nil
}

// canonicalizer rewrites one valid JSON text canonically, reading it once.
type canonicalizer struct {
	in []byte
	at int
}

// member is one object member: its decoded key, and where its canonical value lies in the
// object's buffer of values.
type member struct {
	key      []byte
	from, to int
}

func (c *canonicalizer) skipSpace() {
	for c.at < len(c.in) {
		switch c.in[c.at] {
		case ' ', '\t', '\n', '\r':
			c.at++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at the cursor to out.
func (c *canonicalizer) value(out []byte) []byte {
	c.skipSpace()
	switch c.in[c.at] {
	case '{':
		return c.object(out)
	case '[':
		c.at++
		out = append(out, '[')
		for first := true; ; first = false {
			if c.skipSpace(); c.in[c.at] == ']' {
				c.at++
				return append(out, ']')
			}
			if !first {
				out = append(out, ',')
				c.at++ // the comma
			}
			out = c.value(out)
		}
	case '"':
		token, plain := c.str()
		if plain {
			return append(out, token...)
		}
		return appendString(out, decodeString(token))
	default: // a number or a literal: its text, which is already canonical
		start := c.at
		for c.at < len(c.in) && !endsScalar(c.in[c.at]) {
			c.at++
		}
		return append(out, c.in[start:c.at]...)
	}
}

// endsScalar reports whether b ends a number or a literal.
func endsScalar(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', ',', ']', '}':
		return true
	}
	return false
}

// object appends the canonical form of the object at the cursor: members sorted by their keys'
// UTF-8 bytes, and of a key given twice, the last value, as encoding/json decodes it.
func (c *canonicalizer) object(out []byte) []byte {
	c.at++ // {
	members := make([]member, 0, 8)
	values := make([]byte, 0, 128)
	for {
		c.skipSpace()
		switch c.in[c.at] {
		case '}':
			c.at++
			slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
			out = append(out, '{')
			first := true
			for i, m := range members {
				if i+1 < len(members) && bytes.Equal(members[i+1].key, m.key) {
					continue // a later value of the same key wins
				}
				if !first {
					out = append(out, ',')
				}
				first = false
				out = appendString(out, m.key)
				out = append(out, ':')
				out = append(out, values[m.from:m.to]...)
			}
			return append(out, '}')
		case ',':
			c.at++
			continue
		}
		token, plain := c.str()
		key := token[1 : len(token)-1]
		if !plain {
			key = []byte(decodeString(token))
		}
		c.skipSpace()
		c.at++ // :
		from := len(values)
		values = c.value(values)
		members = append(members, member{key: key, from: from, to: len(values)})
	}
}

// str reads the string at the cursor and returns its text as written, quotes included, and
// whether that text is already canonical: printable ASCII without escapes.
func (c *canonicalizer) str() (token []byte, plain bool) {
	start := c.at
	c.at++
	plain = true
	for c.in[c.at] != '"' {
		if b := c.in[c.at]; b == '\\' {
			plain = false
			c.at++
		} else if b < 0x20 || b >= 0x80 {
			plain = false
		}
		c.at++
	}
	c.at++
	return c.in[start:c.at], plain
}

// decodeString decodes a JSON string token that has been checked already.
func decodeString(token []byte) string {
	var s string
	_ = json.Unmarshal(token, &s)
	return s
}

// appendString appends s as a JSON string the way encoding/json writes it, without HTML
// escaping.
func appendString[T string | []byte](out []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x80 || b == '"' || b == '\\' {
			var buf bytes.Buffer
			writeString(&buf, validUTF8(string(s)))
			return append(out, buf.Bytes()...)
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

// validUTF8 replaces each byte of s that is not part of valid UTF-8 with U+FFFD, as decoding
// a JSON string does. A canonical string holds the replacement character itself, where
// encoding/json, given the invalid byte, would write the escape \ufffd.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for an invalid byte
		i += size
	}
	return b.String()
}

// writeString writes s as a JSON string the way encoding/json does, without
// HTML escaping.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
}

// Digest returns the lowercase hex SHA-256 of doc, exactly as given: 64
// characters.
func Digest(doc []byte) string {
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

// CanonicalDigest returns Digest(CanonicalJSON(v)): the digest of a document
// independent of its key order and spacing. For a StatusDoc it also checks
// the document, since StatusDoc.MarshalJSON does.
func CanonicalDigest(v any) (string, error) {
	b, err := CanonicalJSON(v)
	if err != nil {
		return "", err
	}
	return Digest(b), nil
}
