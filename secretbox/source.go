package secretbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Source is where the server's secret key comes from: a configured key text, or else a key
// file that is generated on first use. The key is loaded once, when first asked for, so a
// process that never seals or opens anything never creates the file.
type Source struct {
	text, path string

	mu  sync.Mutex
	key Key
	ok  bool
}

// NewSource returns a source that parses text when it is not empty (ASTERION_SECRET_KEY, say)
// and otherwise reads the key file at path, generating it (mode 0600, its directory 0700)
// when it does not exist yet.
func NewSource(text, path string) *Source {
	return &Source{text: text, path: path}
}

// Static returns a source that always gives k.
func Static(k Key) *Source {
	return &Source{key: k, ok: true}
}

// Key returns the key, loading or generating it on the first call. A failure is not kept:
// the next call tries again.
func (s *Source) Key() (Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok {
		return s.key, nil
	}
	var (
		k   Key
		err error
	)
	switch {
	case s.text != "":
		k, err = ParseKey(s.text)
	case s.path != "":
		k, err = loadOrCreate(s.path)
	default:
		err = errors.New("secretbox: no secret key configured")
	}
	if err != nil {
		return Key{}, err
	}
	s.key, s.ok = k, true
	return k, nil
}

// loadOrCreate reads the key file at path, or creates it. Creation writes a temporary file and
// links it into place, so two processes starting together agree on one key and neither reads
// a half-written file.
func loadOrCreate(path string) (Key, error) {
	k, err := readKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Key{}, fmt.Errorf("create the secret key directory %s: %w", dir, err)
	}
	k, text, err := NewKey()
	if err != nil {
		return Key{}, err
	}
	tmp, err := os.CreateTemp(dir, ".secret.key-*")
	if err != nil {
		return Key{}, fmt.Errorf("create the secret key file in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600 already; Chmod says so whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return Key{}, fmt.Errorf("restrict the secret key file: %w", err)
	}
	if _, err := tmp.WriteString(text + "\n"); err != nil {
		tmp.Close()
		return Key{}, fmt.Errorf("write the secret key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return Key{}, fmt.Errorf("write the secret key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Key{}, fmt.Errorf("write the secret key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process made it first: use its key.
			return readKeyFile(path)
		}
		return Key{}, fmt.Errorf("create the secret key file %s: %w", path, err)
	}
	return k, nil
}

// readKeyFile reads a key file, refusing one that others than its owner may read.
func readKeyFile(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Key{}, fmt.Errorf("read the secret key file %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("the secret key file %s is open to other users (mode %04o); make it 0600", path, st.Mode().Perm())
	}
	buf := make([]byte, 256)
	n, err := f.Read(buf)
	if err != nil {
		return Key{}, fmt.Errorf("read the secret key file %s: %w", path, err)
	}
	k, err := ParseKey(string(buf[:n]))
	if err != nil {
		return Key{}, fmt.Errorf("the secret key file %s: %w", path, err)
	}
	return k, nil
}
