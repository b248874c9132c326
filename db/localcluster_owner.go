package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// rootClusterHome is where a private cluster lives when the process runs as root: the cluster
// must run as the postgres user, which may enter neither a private .data nor root's home.
const rootClusterHome = "/var/lib/asterion"

// UnreachableDirError means the postgres user, which runs the cluster when the process runs
// as root, cannot enter a directory on the way to the cluster's data directory.
type UnreachableDirError struct {
	// Dir is the data directory; Blocked is the directory above it the user cannot enter.
	Dir, Blocked string
}

func (e *UnreachableDirError) Error() string {
	return fmt.Sprintf("the postgres user cannot reach %s: %s is not open to it", e.Dir, e.Blocked)
}

// LocalClusterDirError means the private cluster's directory could not be created.
type LocalClusterDirError struct {
	Dir string
	Err error
}

func (e *LocalClusterDirError) Error() string {
	return fmt.Sprintf("create the private PostgreSQL's directory %s: %v", e.Dir, e.Err)
}

func (e *LocalClusterDirError) Unwrap() error { return e.Err }

// LocalClusterDir is where the private cluster meant for dir lives. It is dir itself, except
// when the process runs as root: the cluster then runs as the postgres user, and dir may sit
// where that user cannot enter (a private .data, root's home), so it is a directory under
// /var/lib/asterion named after label and dir's absolute path, the same one on every call for
// the same dir. A note there names dir, so a person can tell which clone a directory serves.
func LocalClusterDir(dir, label string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("local cluster directory %s: %w", dir, err)
	}
	if os.Geteuid() != 0 {
		return abs, nil
	}
	sum := sha256.Sum256([]byte(abs))
	home := filepath.Join(rootClusterHome, safeLabel(label)+"-"+hex.EncodeToString(sum[:])[:12])
	for _, d := range []string{rootClusterHome, home} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create %s for the private PostgreSQL (run as root, it cannot live under %s): %w", d, dir, err)
		}
		// The postgres user must pass through, whatever the umask made of the mode.
		if err := os.Chmod(d, 0o755); err != nil {
			return "", fmt.Errorf("open %s to the postgres user: %w", d, err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "for"), []byte(abs+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("note the owner of %s: %w", home, err)
	}
	return filepath.Join(home, "postgres"), nil
}

// safeLabel keeps a label to letters, digits, dots, dashes and underscores.
func safeLabel(label string) string {
	label = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, label)
	if label == "" || label == "." || label == ".." {
		return "cluster"
	}
	return label
}

// PostgresPrograms is the directory of PostgreSQL's server programs: binDir when given, else
// the newest /usr/lib/postgresql/<version>/bin. It fails with ErrNoPostgresPrograms when
// initdb or pg_ctl is missing there.
func PostgresPrograms(binDir string) (string, error) {
	if binDir == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
		sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) < versionOf(matches[j]) })
		if len(matches) == 0 {
			return "", ErrNoPostgresPrograms
		}
		binDir = filepath.Dir(matches[len(matches)-1])
	}
	for _, p := range []string{"initdb", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(binDir, p)); err != nil {
			return "", fmt.Errorf("%w (looked in %s)", ErrNoPostgresPrograms, binDir)
		}
	}
	return binDir, nil
}

// versionOf is the major version in a /usr/lib/postgresql/<version>/bin path, 0 for another.
func versionOf(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// runAsPostgres makes the directory the postgres user's and runs the programs as that user.
func (c *LocalCluster) runAsPostgres() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return errors.New("run as root, the private PostgreSQL must run as the postgres user, and there is none: install Debian's postgresql package (it makes the user) or run as another user")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for p := filepath.Dir(c.cfg.Dir); ; p = filepath.Dir(p) {
		if !enterable(p, uid, gid) {
			return &UnreachableDirError{Dir: c.cfg.Dir, Blocked: p}
		}
		if p == "/" {
			break
		}
	}
	if err := os.Chown(c.cfg.Dir, uid, gid); err != nil {
		return fmt.Errorf("give %s to the postgres user: %w", c.cfg.Dir, err)
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		return fmt.Errorf("run as root, the private PostgreSQL needs runuser (util-linux): %w", err)
	}
	c.asOwner = func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, runuser, append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return nil
}

// enterable reports whether the user uid (primary group gid) may search the directory dir.
func enterable(dir string, uid, gid int) bool {
	st, err := os.Stat(dir)
	if err != nil {
		return false
	}
	mode := st.Mode().Perm()
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return mode&0o001 != 0
	case int(sys.Uid) == uid:
		return mode&0o100 != 0
	case int(sys.Gid) == gid:
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}
