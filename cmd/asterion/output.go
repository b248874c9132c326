package main

import (
	"asterion/db"
	"asterion/jobs/output"
)

// newOutput builds the live output writer of a process that runs jobs and, for a server, the
// hub that delivers chunks to its readers: the writer hands its own chunks to the hub directly,
// and the hub reads other processes' from the table when they announce them.
func newOutput(cn *conn, withHub bool) (*output.Writer, *output.Hub, error) {
	tag := output.NewTag()
	var hub *output.Hub
	var publish func([]db.OutputChunk)
	if withHub {
		var err error
		if hub, err = output.NewHub(output.HubConfig{DB: cn.bun, Pool: cn.pool, Tag: tag, Logger: cn.log}); err != nil {
			return nil, nil, err
		}
		publish = hub.Publish
	}
	w, err := output.NewWriter(output.WriterConfig{DB: cn.bun, Logger: cn.log, Tag: tag, Publish: publish})
	if err != nil {
		return nil, nil, err
	}
	return w, hub, nil
}
