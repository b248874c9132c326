package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// insertJobDoorSQL records the door a job came through (sa_job_door).
const insertJobDoorSQL = `INSERT INTO sa_job_door (job_id, door) VALUES (?, ?)`

// JobDoorStatement is the INSERT of the door of job jobID.
func JobDoorStatement(jobID uuid.UUID, door string) Statement {
	return Statement{Table: "sa_job_door", SQL: insertJobDoorSQL, Args: []any{uuidArg(jobID), door}}
}

// JobDoors are the recorded doors of the jobs ids; a job with none recorded is absent.
func JobDoors(ctx context.Context, idb bun.IDB, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	out := map[uuid.UUID]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		JobID uuid.UUID `bun:"job_id"`
		Door  string    `bun:"door"`
	}
	if err := idb.NewSelect().Table("sa_job_door").Column("job_id", "door").Where("job_id IN (?)", bun.List(ids)).
		Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("read the doors of %d jobs: %w", len(ids), err)
	}
	for _, r := range rows {
		out[r.JobID] = r.Door
	}
	return out, nil
}
