package couch

import (
	"context"
	"encoding/json"
	"fmt"
)

// DeleteDB deletes a database. A database already gone (HTTP 404, e.g. a
// retried DELETE whose first attempt succeeded) is not an error.
func (s *Server) DeleteDB(ctx context.Context, name string) error {
	resp, err := s.do(ctx, &request{Method: "DELETE", Path: "/" + EscapeDB(name)})
	if err != nil {
		if StatusOf(err) == 404 {
			return nil
		}
		return fmt.Errorf("delete database %q on %s: %w", name, s.URL(), err)
	}
	resp.Body.Close()
	return nil
}

// Shards returns the database's cluster.q and cluster.n; 0 when the
// server does not say (PouchDB Server).
func (d *DB) Shards(ctx context.Context) (q, n int, err error) {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path})
	if err != nil {
		return 0, 0, d.fail("open database", err)
	}
	defer resp.Body.Close()
	var info struct {
		Cluster struct {
			Q int `json:"q"`
			N int `json:"n"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return 0, 0, fmt.Errorf("%s: database info: %w", d, err)
	}
	return info.Cluster.Q, info.Cluster.N, nil
}

// Winners returns the winning revision of each of ids that the database
// holds (`POST _all_docs` with keys; a deleted winner is a tombstone's
// rev). Ids the database does not hold are absent from the map.
func (d *DB) Winners(ctx context.Context, ids []string) (map[string]string, error) {
	body, err := json.Marshal(map[string][]string{"keys": ids})
	if err != nil {
		return nil, err
	}
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_all_docs", Body: body, ContentType: "application/json"})
	if err != nil {
		return nil, d.fail("read winning revisions", err)
	}
	defer resp.Body.Close()
	var ans struct {
		Rows []struct {
			ID    string `json:"id"`
			Error string `json:"error"`
			Value struct {
				Rev string `json:"rev"`
			} `json:"value"`
		} `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return nil, fmt.Errorf("%s: _all_docs answer: %w", d, err)
	}
	out := make(map[string]string, len(ans.Rows))
	for _, r := range ans.Rows {
		if r.Error == "" && r.ID != "" && r.Value.Rev != "" {
			out[r.ID] = r.Value.Rev
		}
	}
	return out, nil
}
