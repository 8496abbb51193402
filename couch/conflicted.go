package couch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/sofadb/sofa/replicate"
)

// conflictedPage is the rows per `_changes` request of ConflictedSince.
const conflictedPage = 1000

// ConflictedSince returns the ids of the documents changed after since (a
// seq the database reported, e.g. its update_seq before a copy; nil: from
// the start) whose winning revision has conflicts, from pages of
// `_changes?include_docs=true&conflicts=true`. CouchDB refuses the login
// of a user whose `_users` document has conflicts, which a copy into a
// `_users` that held another revision of it leaves behind.
func (d *DB) ConflictedSince(ctx context.Context, since replicate.Seq) ([]string, error) {
	var ids []string
	for {
		q := "include_docs=true&conflicts=true&limit=" + strconv.Itoa(conflictedPage)
		if len(since) > 0 {
			q += "&since=" + url.QueryEscape(since.String())
		}
		resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_changes", Query: q})
		if err != nil {
			return ids, d.fail("read changes", err)
		}
		var page struct {
			Results []struct {
				ID  string `json:"id"`
				Doc struct {
					Conflicts []string `json:"_conflicts"`
				} `json:"doc"`
			} `json:"results"`
			LastSeq json.RawMessage `json:"last_seq"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return ids, fmt.Errorf("%s: read changes: malformed answer: %w", d, err)
		}
		for _, r := range page.Results {
			if len(r.Doc.Conflicts) > 0 {
				ids = append(ids, r.ID)
			}
		}
		if len(page.Results) < conflictedPage || len(page.LastSeq) == 0 {
			return ids, nil
		}
		since = replicate.Seq(page.LastSeq)
	}
}
