package couch

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
)

// putSecurity writes `_security`. CouchDB 3 answers the PUT of an
// account that is not an admin of the database with 500 no_majority,
// which a cluster also answers when too few of its nodes are up: the
// first such answer is checked against the account's rights (its
// `_session` roles and the database's admins) and, for an account that
// is not an admin, returned at once with notAdmin set, not retried for
// the whole retry time. Any other answer, or rights that cannot be read, is
// retried as every request is.
func (d *DB) putSecurity(ctx context.Context, sec []byte) (*http.Response, error) {
	req := func(noRetry bool) *request {
		return &request{Method: "PUT", Path: d.path + "/_security", Body: sec, ContentType: "application/json", NoRetry: noRetry}
	}
	resp, err := d.srv.do(ctx, req(true))
	if err == nil {
		return resp, nil
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != 500 || e.Reason != "no_majority" {
		if Denied(err) || !retryable(err) {
			return nil, err
		}
		return d.srv.do(ctx, req(false))
	}
	if admin, known := d.accountIsAdmin(ctx); known && !admin {
		d.notAdmin.Store(true)
		return nil, err
	}
	return d.srv.do(ctx, req(false))
}

// accountIsAdmin reads whether the session's account is a server admin
// or an admin of the database (by name or role); known is false when
// either could not be read.
func (d *DB) accountIsAdmin(ctx context.Context) (admin, known bool) {
	var sess struct {
		UserCtx struct {
			Name  string   `json:"name"`
			Roles []string `json:"roles"`
		} `json:"userCtx"`
	}
	if err := d.getJSON(ctx, "/_session", &sess); err != nil {
		return false, false
	}
	u := sess.UserCtx
	if slices.Contains(u.Roles, "_admin") {
		return true, true
	}
	var sec struct {
		Admins struct {
			Names []string `json:"names"`
			Roles []string `json:"roles"`
		} `json:"admins"`
	}
	if err := d.getJSON(ctx, d.path+"/_security", &sec); err != nil {
		return false, false
	}
	if u.Name != "" && slices.Contains(sec.Admins.Names, u.Name) {
		return true, true
	}
	for _, r := range u.Roles {
		if slices.Contains(sec.Admins.Roles, r) {
			return true, true
		}
	}
	return false, true
}

func (d *DB) getJSON(ctx context.Context, path string, out any) error {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: path, NoRetry: true})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}
