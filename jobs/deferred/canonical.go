package deferred

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// CanonicalJSON returns the canonical encoding of v: v is marshalled with
// encoding/json, decoded again (numbers kept as json.Number, so their text is
// preserved exactly), and re-encoded with object keys sorted by their UTF-8
// bytes, no insignificant whitespace, and no HTML escaping. Equal JSON values
// with the same number spellings give the same bytes, whatever the key order
// or spacing of the input. Pass raw JSON as json.RawMessage (a plain []byte
// is marshalled by encoding/json as a base64 string). Duplicate object keys
// keep their last value, as encoding/json does.
func CanonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("deferred: canonical JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("deferred: canonical JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("deferred: canonical JSON: data after the top-level value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, tree); err != nil {
		return nil, fmt.Errorf("deferred: canonical JSON: %w", err)
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
