package couch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// ClusterNodes returns the nodes of the server's cluster, per CouchDB's
// `GET /_membership` (`cluster_nodes`); a server without the endpoint
// (PouchDB Server: 400, 404, 405 or 501) gives nil and no error.
func (s *Server) ClusterNodes(ctx context.Context) ([]string, error) {
	resp, err := s.do(ctx, &request{Method: "GET", Path: "/_membership"})
	if err != nil {
		if st := StatusOf(err); st == 400 || st == 404 || st == 405 || st == 501 {
			return nil, nil
		}
		return nil, s.describe(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClusterNodes []string `json:"cluster_nodes"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: GET /_membership: bad answer: %w", s.URL(), err)
	}
	return out.ClusterNodes, nil
}
