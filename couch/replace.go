package couch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"strconv"
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
// rev). Ids the database does not hold are absent from the map. A
// request over the server's max_http_request_size (413) is asked in
// halves.
func (d *DB) Winners(ctx context.Context, ids []string) (map[string]string, error) {
	body, err := json.Marshal(map[string][]string{"keys": ids})
	if err != nil {
		return nil, err
	}
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_all_docs", Body: body, ContentType: "application/json"})
	if StatusOf(err) == 413 && len(ids) > 1 {
		// over the server's max_http_request_size: in halves
		out, err := d.Winners(ctx, ids[:len(ids)/2])
		if err != nil {
			return nil, err
		}
		more, err := d.Winners(ctx, ids[len(ids)/2:])
		if err != nil {
			return nil, err
		}
		maps.Copy(out, more)
		return out, nil
	}
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

// Ancestry reads revisions of document id with their histories
// (`GET /db/id?open_revs=[...]&revs=true`, without latest): for each
// revision the server holds, the revisions below it ("N-hash", parent
// first, as far as its `_revisions` go). Revisions it lacks are absent
// from the map.
func (d *DB) Ancestry(ctx context.Context, id string, revs []string) (map[string][]string, error) {
	rj, err := json.Marshal(revs)
	if err != nil {
		return nil, err
	}
	q := "revs=true&attachments=false&open_revs=" + url.QueryEscape(string(rj))
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/" + EscapeDocID(id), Query: q, Accept: "multipart/mixed, application/json"})
	if err != nil {
		return nil, d.fail("open_revs", err)
	}
	defer resp.Body.Close()
	docs, _, err := ParseOpenRevs(resp.Body, resp.Header.Get("Content-Type"), id)
	if err != nil {
		return nil, fmt.Errorf("%s: open_revs of %q: %w", d, shortID(id), err)
	}
	out := make(map[string][]string, len(docs))
	for _, doc := range docs {
		var below []string
		for g, h := range doc.Revisions.IDs {
			if g > 0 {
				below = append(below, strconv.Itoa(doc.Revisions.Start-g)+"-"+h)
			}
		}
		out[doc.Rev] = below
	}
	return out, nil
}

// Leaves reads the leaf revisions of document id, deleted ones included
// (`GET /db/id?open_revs=all`): nil, no error, when the server has none.
func (d *DB) Leaves(ctx context.Context, id string) ([]string, error) {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/" + EscapeDocID(id), Query: "open_revs=all&attachments=false", Accept: "multipart/mixed, application/json"})
	if err != nil {
		if StatusOf(err) == 404 && !dbMissing(err) {
			return nil, nil
		}
		return nil, d.fail("open_revs", err)
	}
	defer resp.Body.Close()
	docs, _, err := ParseOpenRevs(resp.Body, resp.Header.Get("Content-Type"), id)
	if err != nil {
		return nil, fmt.Errorf("%s: open_revs of %q: %w", d, shortID(id), err)
	}
	out := make([]string, len(docs))
	for i, doc := range docs {
		out[i] = doc.Rev
	}
	return out, nil
}
