package db

import "strings"

// IsRefusedData reports whether err is PostgreSQL refusing what a statement would write: a
// data exception (class 22, a NUL in a text value among them), an integrity constraint
// (class 23), a limit of the server's (class 54) or an exception raised by a trigger or a
// function (P0001). The same rows written again fail the same way; a lost connection, a
// deadlock, a serialization failure or a cancelled statement do not, and are not refusals.
func IsRefusedData(err error) bool {
	code, ok := sqlState(err)
	if !ok {
		return false
	}
	switch {
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"), strings.HasPrefix(code, "54"):
		return true
	}
	return code == "P0001"
}
