package db

import "io/fs"

// UseFunctions makes m apply the function files of fsys instead of the embedded db/functions.
func (m *Migrator) UseFunctions(fsys fs.FS) { m.functions = fsys }
