package secretbox_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"asterion/secretbox"
)

func TestSourceGeneratesKeyFileOnceAndReusesIt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), ".data", "secret.key")
	// Several processes' first use at once agree on one key.
	var wg sync.WaitGroup
	keys := make([]secretbox.Key, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = secretbox.NewSource("", path).Key()
		}()
	}
	wg.Wait()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no key file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	if dst, err := os.Stat(filepath.Dir(path)); err != nil || dst.Mode().Perm() != 0o700 {
		t.Fatalf("key directory: %v %v", dst, err)
	}
	sealed, err := keys[0].Seal([]byte("v"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("source %d: %v", i, errs[i])
		}
		if got, err := k.Open(sealed, nil); err != nil || string(got) != "v" {
			t.Fatalf("source %d has another key: %v", i, err)
		}
	}
	before, _ := os.ReadFile(path)
	k, err := secretbox.NewSource("", path).Key()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Open(sealed, nil); err != nil || string(got) != "v" {
		t.Fatalf("a later source has another key: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("the key file changed")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".secret.key-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestSourceConfiguredKeyWinsAndBadKeysFail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, text, err := secretbox.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "secret.key")
	got, err := secretbox.NewSource(text, path).Key()
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := k.Seal([]byte("v"), nil)
	if p, err := got.Open(sealed, nil); err != nil || string(p) != "v" {
		t.Fatalf("the configured key is not used: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a key file was made although a key is configured: %v", err)
	}
	if _, err := secretbox.NewSource("short", path).Key(); err == nil {
		t.Fatal("a malformed configured key was accepted")
	}
	// A key file others may read is refused, not used.
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, []byte(text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := secretbox.NewSource("", open).Key(); err == nil {
		t.Fatal("a world-readable key file was accepted")
	}
	garbled := filepath.Join(dir, "garbled.key")
	if err := os.WriteFile(garbled, []byte("nonsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secretbox.NewSource("", garbled).Key(); err == nil {
		t.Fatal("a garbled key file was accepted")
	}
}
