package registry

import (
	"context"

	"github.com/uptrace/bun"

	"asterion/db"
)

// writes collects the write statements of one step: into the caller's batch when it has one
// (the caller runs it later, in one round trip with the rest of its transaction), or into a
// batch of the step's own that flush runs.
type writes struct {
	idb bun.IDB
	b   *db.Batch
	own bool
}

// writesTo returns the writes of a step that runs on idb and was handed b (nil: none).
func writesTo(idb bun.IDB, b *db.Batch) writes {
	if b != nil {
		return writes{idb: idb, b: b}
	}
	return writes{idb: idb, b: db.NewBatch(idb), own: true}
}

func (w writes) insert(s db.Statement) { w.b.Insert(s) }

func (w writes) update(s db.Statement) { w.b.Update(s) }

// flush runs the statements now when the batch is the step's own; a caller's batch is left to
// its caller.
func (w writes) flush(ctx context.Context) error {
	if !w.own {
		return nil
	}
	return w.b.Exec(ctx, w.idb)
}
