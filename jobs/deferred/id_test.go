package deferred

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/google/uuid"
)

func TestOperationNamespace(t *testing.T) {
	want := uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:asterion:deferred-operation-id:v1"))
	if OperationNamespace != want {
		t.Fatalf("OperationNamespace = %s, want %s", OperationNamespace, want)
	}
}

func TestOperationIDDeterministic(t *testing.T) {
	subj := map[string]string{"prompt_id": "p1", "job_id": "j1"}
	id := OperationID("prompt.execute", "worker", subj, "")
	if id.Version() != 5 || id.Variant() != uuid.RFC4122 {
		t.Fatalf("id %s is not an RFC 4122 UUIDv5", id)
	}
	// Same arguments, a map built in another order: same id.
	other := map[string]string{}
	other["job_id"] = "j1"
	other["prompt_id"] = "p1"
	for i := 0; i < 100; i++ {
		if got := OperationID("prompt.execute", "worker", other, ""); got != id {
			t.Fatalf("run %d: %s != %s", i, got, id)
		}
	}
	// A frozen value: changing the encoding changes every stored id.
	if want := uuid.MustParse("3625d646-479a-5c2f-becb-cb12aa412538"); id != want {
		t.Errorf("OperationID = %s; the encoding changed (frozen value %s)", id, want)
	}
	if OperationID("k", "o", nil, "") != OperationID("k", "o", map[string]string{}, "") {
		t.Error("nil and empty subject differ")
	}
}

func TestOperationIDIdempotencyKey(t *testing.T) {
	a := OperationID("k", "o", map[string]string{"x": "1"}, "key-1")
	b := OperationID("k", "o", map[string]string{"x": "2"}, "key-1")
	if a != b {
		t.Error("idempotency key does not replace the subject")
	}
	if a == OperationID("k", "o", map[string]string{"x": "1"}, "key-2") {
		t.Error("different keys give the same id")
	}
	if a == OperationID("k", "o", map[string]string{"x": "1"}, "") {
		t.Error("key and no key give the same id")
	}
	if a == OperationID("k2", "o", nil, "key-1") || a == OperationID("k", "o2", nil, "key-1") {
		t.Error("the key does not stay scoped by kind and owner")
	}
}

func TestOperationIDDistinct(t *testing.T) {
	type args struct {
		kind, owner string
		subject     map[string]string
		key         string
	}
	cases := []args{
		{"a", "bc", nil, ""},
		{"ab", "c", nil, ""},
		{"", "abc", nil, ""},
		{"abc", "", nil, ""},
		{"k", "o", map[string]string{"a": "bc"}, ""},
		{"k", "o", map[string]string{"ab": "c"}, ""},
		{"k", "o", map[string]string{"a": "b", "c": "d"}, ""},
		{"k", "o", map[string]string{"a": "bc", "": "d"}, ""},
		{"k", "o", map[string]string{"a": "b"}, ""},
		{"k", "o", map[string]string{"a": ""}, ""},
		{"k", "o", map[string]string{"": "a"}, ""},
		{"k", "o", nil, "a"},
		{"k", "oK", nil, ""},
		{"k", "o", map[string]string{"K": ""}, ""},
		{"k", "o", nil, "S"},
	}
	seen := map[uuid.UUID]int{}
	for i, c := range cases {
		id := OperationID(c.kind, c.owner, c.subject, c.key)
		if j, ok := seen[id]; ok {
			t.Errorf("cases %d %+v and %d %+v share id %s", j, cases[j], i, c, id)
		}
		seen[id] = i
	}
}

// decodeOperationName inverts operationName; a successful round trip over
// random inputs shows the encoding is injective.
func decodeOperationName(b []byte) (kind, owner string, subject map[string]string, key string, err error) {
	readLP := func() (string, error) {
		if len(b) < 8 {
			return "", fmt.Errorf("short length")
		}
		n := binary.BigEndian.Uint64(b)
		b = b[8:]
		if uint64(len(b)) < n {
			return "", fmt.Errorf("short string")
		}
		s := string(b[:n])
		b = b[n:]
		return s, nil
	}
	v, err := readLP()
	if err != nil || v != idEncodingVersion {
		return "", "", nil, "", fmt.Errorf("version %q %v", v, err)
	}
	if kind, err = readLP(); err != nil {
		return
	}
	if owner, err = readLP(); err != nil {
		return
	}
	if len(b) == 0 {
		return "", "", nil, "", fmt.Errorf("no tag")
	}
	tag := b[0]
	b = b[1:]
	switch tag {
	case 'K':
		key, err = readLP()
	case 'S':
		if len(b) < 8 {
			return "", "", nil, "", fmt.Errorf("short count")
		}
		n := binary.BigEndian.Uint64(b)
		b = b[8:]
		subject = map[string]string{}
		prev := ""
		for i := uint64(0); i < n; i++ {
			k, e1 := readLP()
			v, e2 := readLP()
			if e1 != nil || e2 != nil {
				return "", "", nil, "", fmt.Errorf("bad pair")
			}
			if i > 0 && k <= prev {
				return "", "", nil, "", fmt.Errorf("keys not sorted")
			}
			prev = k
			subject[k] = v
		}
	default:
		err = fmt.Errorf("bad tag %q", tag)
	}
	if err == nil && len(b) != 0 {
		err = fmt.Errorf("%d trailing bytes", len(b))
	}
	return
}

func TestOperationNameInjective(t *testing.T) {
	rng := rand.New(rand.NewSource(55))
	alphabet := []byte("abcK S\x00\x01/")
	str := func() string {
		n := rng.Intn(5)
		s := make([]byte, n)
		for i := range s {
			s[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return string(s)
	}
	names := map[string]string{}
	for i := 0; i < 20000; i++ {
		kind, owner := str(), str()
		var subject map[string]string
		key := ""
		if rng.Intn(4) == 0 {
			key = str()
		}
		if key == "" {
			subject = map[string]string{}
			for j := rng.Intn(4); j > 0; j-- {
				subject[str()] = str()
			}
		}
		name := operationName(kind, owner, subject, key)
		k, o, s, ky, err := decodeOperationName(name)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if k != kind || o != owner || ky != key || (key == "" && !reflect.DeepEqual(s, subject)) {
			t.Fatalf("round trip of (%q,%q,%v,%q) gave (%q,%q,%v,%q)", kind, owner, subject, key, k, o, s, ky)
		}
		desc := fmt.Sprintf("%q|%q|%v|%q", kind, owner, subject, key)
		if prev, ok := names[string(name)]; ok && prev != desc {
			t.Fatalf("%s and %s share an encoding", prev, desc)
		}
		names[string(name)] = desc
	}
}
