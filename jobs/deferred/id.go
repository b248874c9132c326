package deferred

import (
	"encoding/binary"
	"sort"

	"github.com/google/uuid"
)

// OperationNamespace is the fixed UUIDv5 namespace of deferred operation ids.
// It is uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:asterion:deferred-operation-id:v1"))
// written out, so that ids never change with the code that derives them.
var OperationNamespace = uuid.MustParse("95cc1894-0a04-5634-89d0-5cc6c2732cb5")

// idEncodingVersion starts every encoded name, so that a later encoding can
// never produce the same name as this one.
const idEncodingVersion = "asterion/deferred-operation-id/v1"

// OperationID returns the deterministic id of the operation of kind, owned by
// owner, about subject: the same arguments always give the same id. When
// idempotencyKey is non-empty it replaces subject, so every request with that
// key gets the same id whatever its subject. The caller scopes the key (for
// example by prefixing the user id) when keys of different users must not
// meet.
//
// The id is a UUIDv5 in OperationNamespace over an unambiguous encoding:
// every string is length-prefixed and subject keys are sorted, so distinct
// arguments give distinct names (("a","bc") and ("ab","c") differ) and map
// order does not matter. A nil and an empty subject are the same subject.
func OperationID(kind, owner string, subject map[string]string, idempotencyKey string) uuid.UUID {
	return uuid.NewSHA1(OperationNamespace, operationName(kind, owner, subject, idempotencyKey))
}

// operationName is the canonical, injective encoding hashed by OperationID:
//
//	lp(version) lp(kind) lp(owner) 'K' lp(key)
//	lp(version) lp(kind) lp(owner) 'S' u64(n) lp(k1) lp(v1) … lp(kn) lp(vn)
//
// where lp(s) is the length of s as a big-endian uint64 followed by s, and
// k1 < … < kn.
func operationName(kind, owner string, subject map[string]string, idempotencyKey string) []byte {
	n := 3*8 + len(idEncodingVersion) + len(kind) + len(owner) + 1 + 8 + len(idempotencyKey)
	for k, v := range subject {
		n += 16 + len(k) + len(v)
	}
	b := make([]byte, 0, n)
	b = appendLP(b, idEncodingVersion)
	b = appendLP(b, kind)
	b = appendLP(b, owner)
	if idempotencyKey != "" {
		b = append(b, 'K')
		return appendLP(b, idempotencyKey)
	}
	keys := make([]string, 0, len(subject))
	for k := range subject {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = append(b, 'S')
	b = binary.BigEndian.AppendUint64(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendLP(b, k)
		b = appendLP(b, subject[k])
	}
	return b
}

// appendLP appends the length of s as a big-endian uint64, then s.
func appendLP(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
