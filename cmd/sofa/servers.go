package main

import (
	"context"

	"github.com/sofadb/sofa/couch"
)

// runServers replicates every database of a server (whole-server mode).
func (rc *replicateCmd) runServers(ctx context.Context, src, tgt *couch.Server) error {
	return usageErr("whole-server replication is not available yet: give database URLs")
}
