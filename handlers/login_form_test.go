package handlers

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"asterion/identity"
)

const formType = "application/x-www-form-urlencoded"

func TestParseLoginForm(t *testing.T) {
	t.Parallel()
	f, err := parseLoginForm(formType+"; charset=UTF-8", []byte("csrf_token=abc&username=+alice+&password=p%26ss+word&next=%2Fmission"))
	if err != nil {
		t.Fatal(err)
	}
	if f != (loginForm{CSRF: "abc", Username: "alice", Password: "p&ss word", Next: "/mission"}) {
		t.Fatalf("parsed %+v", f)
	}
	long := strings.Repeat("a", identity.MaxPasswordLen+1)
	for name, c := range map[string]struct{ ct, body string }{
		"json":              {"application/json", `{"username":"alice"}`},
		"multipart":         {"multipart/form-data; boundary=x", "--x--"},
		"no content type":   {"", "username=alice"},
		"bad escape":        {formType, "username=%zz"},
		"password twice":    {formType, "password=a&password=b"},
		"csrf twice":        {formType, "csrf_token=a&csrf_token=b"},
		"long password":     {formType, "password=" + long},
		"long user name":    {formType, "username=" + strings.Repeat("u", maxLoginUsername+1)},
		"oversized body":    {formType, "x=" + strings.Repeat("x", maxLoginBody)},
		"semicolon in body": {formType, "username=a;password=b"},
	} {
		if _, err := parseLoginForm(c.ct, []byte(c.body)); !errors.Is(err, errLoginForm) {
			t.Errorf("%s: %v, want errLoginForm", name, err)
		}
	}
}

// FuzzParseLoginForm: any body either fails with errLoginForm or gives fields within their
// bounds that a form built from them parses back to.
func FuzzParseLoginForm(f *testing.F) {
	f.Add(formType, "csrf_token=abc&username=alice&password=secret&next=%2Fmission")
	f.Add(formType, "username=%00%ff&password=&password=")
	f.Add("application/x-www-form-urlencoded; charset=latin1", "a=b&&c")
	f.Add("text/plain", "username=alice")
	f.Fuzz(func(t *testing.T, ct, body string) {
		got, err := parseLoginForm(ct, []byte(body))
		if err != nil {
			if !errors.Is(err, errLoginForm) {
				t.Fatalf("error %v is not errLoginForm", err)
			}
			return
		}
		if len(got.Username) > maxLoginUsername || len(got.Password) > identity.MaxPasswordLen ||
			len(got.CSRF) > maxLoginField || len(got.Next) > maxLoginField {
			t.Fatalf("field over its bound: %d %d %d %d", len(got.Username), len(got.Password), len(got.CSRF), len(got.Next))
		}
		if got.Username != strings.TrimSpace(got.Username) {
			t.Fatalf("user name %q not trimmed", got.Username)
		}
		again := url.Values{csrfField: {got.CSRF}, "username": {got.Username}, "password": {got.Password}, "next": {got.Next}}
		back, err := parseLoginForm(formType, []byte(again.Encode()))
		if err != nil || back != got {
			t.Fatalf("round trip of %+v gave %+v, %v", got, back, err)
		}
	})
}
