package sofa

import (
	"context"
	"fmt"

	"github.com/sofadb/sofa/couch"
)

// replicasWarning is the warning for databases to be created with n
// replicas on a target whose cluster has fewer nodes (`GET /_membership`):
// CouchDB then creates them with one replica per node, without an error.
// "" when n is 0 or 1, the nodes suffice, or the target does not say
// (PouchDB Server, an error: the run's own requests will tell).
func replicasWarning(ctx context.Context, tgt *couch.Server, n int) string {
	if n <= 1 {
		return ""
	}
	nodes, err := tgt.ClusterNodes(ctx)
	if err != nil || len(nodes) == 0 || len(nodes) >= n {
		return ""
	}
	return fmt.Sprintf("n=%d replicas asked for the databases created, but %s has %d node(s) (/_membership): CouchDB creates them with n=%d", n, tgt.URL(), len(nodes), len(nodes))
}
