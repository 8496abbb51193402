package couchtest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// docInfo is what _changes tells about one document.
type docInfo struct {
	leaves  []string // sorted
	winner  string
	deleted bool
}

type revRef struct {
	ID  string `json:"id"`
	Rev string `json:"rev"`
}

// revResult is one fetched leaf: the document, or why it is missing.
type revResult struct {
	doc map[string]json.RawMessage
	err string
}

type changesAnswer struct {
	Results []struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
		Changes []struct {
			Rev string `json:"rev"`
		} `json:"changes"`
	} `json:"results"`
}

// listDocs reads the whole changes feed twice: with style=all_docs for the
// leaves, and in the default main_only style for the winner (which CouchDB
// lists first in all_docs style but PouchDB Server does not).
func listDocs(ctx context.Context, c *Client) (map[string]*docInfo, error) {
	var all, main changesAnswer
	if err := c.GetJSON(ctx, "/_changes?style=all_docs", &all); err != nil {
		return nil, err
	}
	if err := c.GetJSON(ctx, "/_changes", &main); err != nil {
		return nil, err
	}
	docs := make(map[string]*docInfo, len(all.Results))
	for _, r := range all.Results {
		di := &docInfo{}
		for _, ch := range r.Changes {
			di.leaves = append(di.leaves, ch.Rev)
		}
		slices.Sort(di.leaves)
		di.leaves = slices.Compact(di.leaves)
		docs[r.ID] = di // a later row for the same id wins
	}
	for _, r := range main.Results {
		di, ok := docs[r.ID]
		if !ok || len(r.Changes) == 0 {
			continue
		}
		di.winner = r.Changes[0].Rev
		di.deleted = r.Deleted
	}
	return docs, nil
}

// fetchRevs fetches the given leaves with revs=true&attachments=true.
func fetchRevs(ctx context.Context, c *Client, refs []revRef) (map[revRef]revResult, error) {
	var ans struct {
		Results []struct {
			ID   string `json:"id"`
			Docs []json.RawMessage
		} `json:"results"`
	}
	body := struct {
		Docs []revRef `json:"docs"`
	}{refs}
	err := c.PostJSON(ctx, "/_bulk_get?revs=true&attachments=true", body, &ans)
	switch StatusOf(err) {
	case 0:
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return fetchOpenRevs(ctx, c, refs)
	default:
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	out := make(map[revRef]revResult, len(refs))
	for _, r := range ans.Results {
		for _, raw := range r.Docs {
			ref, res := parseRevEntry(r.ID, raw)
			out[ref] = res
		}
	}
	fillMissing(out, refs)
	return out, nil
}

// fetchOpenRevs is the fallback for servers without _bulk_get: one GET per
// document with the wanted revs as open_revs.
func fetchOpenRevs(ctx context.Context, c *Client, refs []revRef) (map[revRef]revResult, error) {
	byID := map[string][]string{}
	var order []string
	for _, r := range refs {
		if _, ok := byID[r.ID]; !ok {
			order = append(order, r.ID)
		}
		byID[r.ID] = append(byID[r.ID], r.Rev)
	}
	out := make(map[revRef]revResult, len(refs))
	for _, id := range order {
		revs, _ := json.Marshal(byID[id])
		path := "/" + EscapeID(id) + "?revs=true&attachments=true&open_revs=" + url.QueryEscape(string(revs))
		var entries []json.RawMessage
		if err := c.GetJSON(ctx, path, &entries); err != nil {
			return nil, err
		}
		for _, raw := range entries {
			ref, res := parseRevEntry(id, raw)
			out[ref] = res
		}
	}
	fillMissing(out, refs)
	return out, nil
}

// parseRevEntry reads one {"ok":doc}, {"missing":rev} or
// {"error":{"id","rev","error","reason"}} entry (PouchDB Server also puts
// error and reason flat in the entry).
func parseRevEntry(id string, raw json.RawMessage) (revRef, revResult) {
	var e struct {
		OK      map[string]json.RawMessage `json:"ok"`
		Missing string                     `json:"missing"`
		Error   json.RawMessage            `json:"error"`
		Rev     string                     `json:"rev"`
		Reason  string                     `json:"reason"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return revRef{ID: id}, revResult{err: "undecodable entry: " + err.Error()}
	}
	switch {
	case e.OK != nil:
		var rev string
		_ = json.Unmarshal(e.OK["_rev"], &rev)
		return revRef{ID: id, Rev: rev}, revResult{doc: e.OK}
	case e.Missing != "":
		return revRef{ID: id, Rev: e.Missing}, revResult{err: "missing"}
	default:
		var inner struct {
			Rev    string `json:"rev"`
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(e.Error, &inner) == nil && inner.Error != "" {
			return revRef{ID: id, Rev: inner.Rev}, revResult{err: inner.Error + ": " + inner.Reason}
		}
		var flat string
		_ = json.Unmarshal(e.Error, &flat)
		return revRef{ID: id, Rev: e.Rev}, revResult{err: flat + ": " + e.Reason}
	}
}

func fillMissing(out map[revRef]revResult, refs []revRef) {
	for _, r := range refs {
		if _, ok := out[r]; !ok {
			out[r] = revResult{err: "not returned by the server"}
		}
	}
}

func compareRev(d *Diff, p revRef, s, t revResult, opts CompareOptions) {
	where := fmt.Sprintf("doc %s rev %s", short(p.ID), p.Rev)
	if s.err != "" || t.err != "" {
		d.addf("%s: fetch failed: source %q, target %q", where, s.err, t.err)
		return
	}
	sb, tb := canonicalBody(s.doc), canonicalBody(t.doc)
	if !bytes.Equal(sb, tb) {
		d.addf("%s: body differs: source %s, target %s", where, clip(sb), clip(tb))
	}
	if !opts.IgnoreRevisions {
		sr, tr := canonical(s.doc["_revisions"]), canonical(t.doc["_revisions"])
		if !bytes.Equal(sr, tr) {
			d.addf("%s: _revisions differ: source %s, target %s", where, clip(sr), clip(tr))
		}
	}
	compareAttachments(d, where, s.doc["_attachments"], t.doc["_attachments"], revGen(p.Rev, opts), opts.DigestsByKind)
}

// canonicalBody is the document without _attachments and _revisions as RFC
// 8785 canonical JSON.
func canonicalBody(doc map[string]json.RawMessage) []byte {
	rest := make(map[string]json.RawMessage, len(doc))
	for k, v := range doc {
		if k != "_attachments" && k != "_revisions" {
			rest[k] = v
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return []byte("invalid JSON: " + err.Error())
	}
	return canonical(b)
}

func canonical(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Canonicalize(); err != nil {
		return []byte("invalid JSON: " + err.Error())
	}
	return v
}

func clip(b []byte) string {
	if len(b) > 160 {
		return string(b[:160]) + "..."
	}
	return string(b)
}

type attInfo struct {
	ContentType string `json:"content_type"`
	Digest      string `json:"digest"`
	Revpos      int64  `json:"revpos"`
	Length      *int64 `json:"length"`
	Data        string `json:"data"`
	Stub        bool   `json:"stub"`
}

// revGen is the generation a PouchDB Server target may give as revpos
// (see CompareOptions.PouchDBRevpos), or -1.
func revGen(rev string, opts CompareOptions) int64 {
	if !opts.PouchDBRevpos {
		return -1
	}
	var g int64
	if _, err := fmt.Sscanf(rev, "%d-", &g); err != nil {
		return -1
	}
	return g
}

func compareAttachments(d *Diff, where string, sraw, traw json.RawMessage, altRevpos int64, digestsByKind bool) {
	var sa, ta map[string]attInfo
	if len(sraw) > 0 {
		if err := json.Unmarshal(sraw, &sa); err != nil {
			d.addf("%s: source _attachments undecodable: %v", where, err)
			return
		}
	}
	if len(traw) > 0 {
		if err := json.Unmarshal(traw, &ta); err != nil {
			d.addf("%s: target _attachments undecodable: %v", where, err)
			return
		}
	}
	for _, name := range sortedKeys(sa) {
		s := sa[name]
		t, ok := ta[name]
		aw := fmt.Sprintf("%s attachment %q", where, name)
		if !ok {
			d.addf("%s: missing on target", aw)
			continue
		}
		if s.ContentType != t.ContentType {
			d.addf("%s: content_type differs: source %q, target %q", aw, s.ContentType, t.ContentType)
		}
		if s.Digest != t.Digest && !digestsByKind {
			d.addf("%s: digest differs: source %s, target %s", aw, s.Digest, t.Digest)
		}
		if s.Revpos != t.Revpos && !(altRevpos >= 0 && s.Revpos < altRevpos && t.Revpos == altRevpos) {
			d.addf("%s: revpos differs: source %d, target %d", aw, s.Revpos, t.Revpos)
		}
		sd, serr := attData(s)
		td, terr := attData(t)
		if serr != "" || terr != "" {
			d.addf("%s: bytes unavailable: source %q, target %q", aw, serr, terr)
			continue
		}
		if !bytes.Equal(sd, td) {
			d.addf("%s: bytes differ: source %d bytes md5 %x, target %d bytes md5 %x",
				aw, len(sd), md5.Sum(sd), len(td), md5.Sum(td))
		}
		// length as the server gave it, else the bytes' (inline data
		// often comes without one)
		sl, tl := int64(len(sd)), int64(len(td))
		if s.Length != nil {
			sl = *s.Length
		}
		if t.Length != nil {
			tl = *t.Length
		}
		if sl != tl {
			d.addf("%s: length differs: source %d, target %d", aw, sl, tl)
		}
	}
	for _, name := range sortedKeys(ta) {
		if _, ok := sa[name]; !ok {
			d.addf("%s attachment %q: only on target", where, name)
		}
	}
}

// attData decodes an inline attachment; a stub or a length that does not
// match the bytes is reported as a problem.
func attData(a attInfo) ([]byte, string) {
	if a.Stub && a.Data == "" {
		return nil, "stub without data"
	}
	b, err := base64.StdEncoding.DecodeString(a.Data)
	if err != nil {
		return nil, "bad base64: " + err.Error()
	}
	if a.Length != nil && *a.Length != int64(len(b)) {
		return nil, fmt.Sprintf("length %d but %d bytes", *a.Length, len(b))
	}
	return b, ""
}

func compareSecurity(ctx context.Context, d *Diff, src, dst *Client) error {
	var s, t map[string]json.RawMessage
	if err := src.GetJSON(ctx, "/_security", &s); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if err := dst.GetJSON(ctx, "/_security", &t); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	sn, tn := normalSecurity(s), normalSecurity(t)
	if !bytes.Equal(sn, tn) {
		d.addf("_security differs: source %s, target %s", clip(sn), clip(tn))
	}
	return nil
}

// normalSecurity gives _security as canonical JSON with admins and members
// always present and their names and roles sorted.
func normalSecurity(sec map[string]json.RawMessage) []byte {
	out := make(map[string]json.RawMessage, len(sec)+2)
	for k, v := range sec {
		out[k] = v
	}
	for _, section := range []string{"admins", "members"} {
		var g map[string]json.RawMessage
		_ = json.Unmarshal(out[section], &g)
		if g == nil {
			g = map[string]json.RawMessage{}
		}
		for _, field := range []string{"names", "roles"} {
			var list []string
			_ = json.Unmarshal(g[field], &list)
			if list == nil {
				list = []string{}
			}
			slices.Sort(list)
			g[field], _ = json.Marshal(list)
		}
		out[section], _ = json.Marshal(g)
	}
	b, _ := json.Marshal(out)
	return canonical(b)
}

func compareRevsLimit(ctx context.Context, d *Diff, src, dst *Client, srcURL, dstURL string, hc *http.Client) error {
	var s, t json.RawMessage
	errS := src.GetJSON(ctx, "/_revs_limit", &s)
	errT := dst.GetJSON(ctx, "/_revs_limit", &t)
	// Only PouchDB Server lacks the route: its 404 means "no such
	// setting", anyone else's is a failure.
	for _, side := range []struct {
		err error
		url string
	}{{errS, srcURL}, {errT, dstURL}} {
		if StatusOf(side.err) == http.StatusNotFound {
			if pouch, err := isPouchDB(ctx, side.url, hc); err == nil && pouch {
				return nil
			}
		}
	}
	if errS != nil {
		return fmt.Errorf("source: %w", errS)
	}
	if errT != nil {
		return fmt.Errorf("target: %w", errT)
	}
	if !bytes.Equal(canonical(s), canonical(t)) {
		d.addf("_revs_limit differs: source %s, target %s", s, t)
	}
	return nil
}

// isPouchDB reads the welcome (GET /) of the server holding the database
// at dbURL and reports whether it is PouchDB Server.
func isPouchDB(ctx context.Context, dbURL string, hc *http.Client) (bool, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return false, fmt.Errorf("bad database URL")
	}
	p := strings.TrimRight(u.EscapedPath(), "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	u.Path, u.RawPath, u.RawQuery = "", "", ""
	c := NewClient(u.String() + p)
	c.HTTP = hc
	var w map[string]json.RawMessage
	if err := c.GetJSON(ctx, "/", &w); err != nil {
		return false, err
	}
	_, pouch := w["express-pouchdb"]
	return pouch, nil
}
