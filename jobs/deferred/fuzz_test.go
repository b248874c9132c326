package deferred

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

// addExamples seeds f with every example of schema, valid and invalid.
func addExamples(f *testing.F, schema string) {
	for _, verdict := range []string{"valid", "invalid"} {
		dir := "schema/examples/" + verdict + "/" + schema
		entries, err := fs.ReadDir(Schemas, dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			b, err := fs.ReadFile(Schemas, dir+"/"+e.Name())
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzValidateStatus checks that ValidateStatus never panics, that a refusal
// is a one-line ErrInvalidDocument, and that a document it accepts either
// fails ParseStatusDoc cleanly (a rule the schema cannot express, or a value
// Go cannot hold) or parses into a StatusDoc whose marshalled form passes the
// schema again and parses back to the same value.
func FuzzValidateStatus(f *testing.F) {
	addExamples(f, StatusSchema)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ValidateStatus(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidDocument) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("ValidateStatus error %q is not a one-line ErrInvalidDocument", err)
			}
			if _, perr := ParseStatusDoc(data); perr == nil {
				t.Fatalf("ParseStatusDoc accepts what ValidateStatus refuses: %q", data)
			}
			return
		}
		d, err := ParseStatusDoc(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidDocument) {
				t.Fatalf("ParseStatusDoc error %v is not ErrInvalidDocument", err)
			}
			return
		}
		out, err := d.MarshalJSON()
		if err != nil {
			t.Fatalf("a parsed document does not marshal: %v", err)
		}
		if err := ValidateStatus(out); err != nil {
			t.Fatalf("re-marshalled %s fails: %v", out, err)
		}
		again, err := ParseStatusDoc(out)
		if err != nil || !reflect.DeepEqual(again, d) {
			t.Fatalf("round trip of %s: %+v, %v; want %+v", out, again, err, d)
		}
	})
}

// FuzzValidateHandle is FuzzValidateStatus for deferred-operation.v1.
func FuzzValidateHandle(f *testing.F) {
	addExamples(f, HandleSchema)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ValidateHandle(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidDocument) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("ValidateHandle error %q is not a one-line ErrInvalidDocument", err)
			}
			if _, perr := ParseHandle(data); perr == nil {
				t.Fatalf("ParseHandle accepts what ValidateHandle refuses: %q", data)
			}
			return
		}
		h, err := ParseHandle(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidDocument) {
				t.Fatalf("ParseHandle error %v is not ErrInvalidDocument", err)
			}
			return
		}
		out, err := h.MarshalJSON()
		if err != nil {
			t.Fatalf("a parsed handle does not marshal: %v", err)
		}
		if err := ValidateHandle(out); err != nil {
			t.Fatalf("re-marshalled %s fails: %v", out, err)
		}
		again, err := ParseHandle(out)
		if err != nil || !reflect.DeepEqual(again, h) {
			t.Fatalf("round trip of %s: %+v, %v; want %+v", out, again, err, h)
		}
	})
}
