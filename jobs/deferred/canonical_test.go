package deferred

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{json.RawMessage(` { "b" : 1 , "a" : [ 3 , { "d":null, "c":true } ] } `), `{"a":[3,{"c":true,"d":null}],"b":1}`},
		{json.RawMessage(`{"n":1.50,"e":1e3,"big":123456789012345678901234567890}`), `{"big":123456789012345678901234567890,"e":1e3,"n":1.50}`},
		{json.RawMessage(`"<a&b>"`), `"<a&b>"`},
		{json.RawMessage(`{"é":1,"z":2,"Z":3,"":4}`), `{"":4,"Z":3,"z":2,"é":1}`},
		{json.RawMessage(`{"a":1,"a":2}`), `{"a":2}`},
		{map[string]any{"y": []int{1, 2}, "x": "s\n"}, `{"x":"s\n","y":[1,2]}`},
		{struct {
			B string `json:"b"`
			A int    `json:"a"`
		}{"x", 7}, `{"a":7,"b":"x"}`},
		{nil, `null`},
		{json.RawMessage(`[]`), `[]`},
		{json.RawMessage(`{}`), `{}`},
	}
	for _, c := range cases {
		got, err := CanonicalJSON(c.in)
		if err != nil {
			t.Errorf("CanonicalJSON(%v) error %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("CanonicalJSON(%s) = %s, want %s", c.in, got, c.want)
		}
		again, err := CanonicalJSON(json.RawMessage(got))
		if err != nil || string(again) != string(got) {
			t.Errorf("CanonicalJSON is not idempotent on %s: %s %v", got, again, err)
		}
	}
}

func TestCanonicalJSONErrors(t *testing.T) {
	for _, in := range []any{json.RawMessage(`{`), json.RawMessage(`{} {}`), make(chan int), json.RawMessage(``)} {
		if _, err := CanonicalJSON(in); err == nil {
			t.Errorf("CanonicalJSON(%v) accepted", in)
		}
	}
}

func TestDigest(t *testing.T) {
	if got := Digest(nil); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Digest(nil) = %s", got)
	}
	if got := Digest([]byte("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("Digest(abc) = %s", got)
	}
	a, err1 := CanonicalDigest(json.RawMessage(`{"b":1,"a":2}`))
	b, err2 := CanonicalDigest(json.RawMessage("{\n  \"a\": 2,\n  \"b\": 1\n}"))
	if err1 != nil || err2 != nil || a != b || len(a) != 64 || strings.ToLower(a) != a {
		t.Errorf("CanonicalDigest differs for equal documents: %s %s %v %v", a, b, err1, err2)
	}
}

// BenchmarkCanonicalJSON: the canonical form of a status document, computed on every status
// change of every operation, one pass against the tree it replaced.
func BenchmarkCanonicalJSON(b *testing.B) {
	doc := json.RawMessage(`{"schema":"deferred-operation-status.v1","operation_id":"op_0192f1c2a3b4c5d6e7f8091a2b3c4d5e",` +
		`"kind":"prompt","status":"running","updated_at":"2026-11-30T12:00:00.123456Z","expires_at":"2026-12-01T12:00:00.000000Z",` +
		`"retry_after_seconds":2,"cancel":{"available":true,"href":"/sa-core/v1/operations/op_0192f1c2a3b4c5d6e7f8091a2b3c4d5e/cancel"}}`)
	for _, impl := range []struct {
		name string
		f    func(any) ([]byte, error)
	}{{"one-pass", CanonicalJSON}, {"tree", canonicalByTree}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := impl.f(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
