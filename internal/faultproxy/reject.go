package faultproxy

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// rejectDocs applies a RejectDocs rule: see the Fault's doc.
func (p *Proxy) rejectDocs(w http.ResponseWriter, r *http.Request, body []byte, rule *compiledRule) {
	path := strings.TrimPrefix(r.URL.EscapedPath(), p.target.Path)
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/_bulk_docs"):
		p.rejectBulk(w, r, body, rule)
	case r.Method == http.MethodPut || r.Method == http.MethodDelete:
		if id, ok := docIDOf(path); ok && rule.ids[id] {
			rule.c.fired.Add(1)
			rule.c.docs.Add(1)
			p.faults.Add(1)
			writeError(w, http.StatusForbidden, "forbidden", rule.Reason, "")
			return
		}
		p.pass(w, r, body)
	default:
		p.pass(w, r, body)
	}
}

// docIDOf returns the document id of /{db}/{id}[/{attachment}] paths,
// including _design/ and _local/ ids; ok is false for database-level
// paths such as /{db}/_security.
func docIDOf(escaped string) (string, bool) {
	seg := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	if len(seg) < 2 || seg[1] == "" {
		return "", false
	}
	if (seg[1] == "_design" || seg[1] == "_local") && len(seg) >= 3 {
		id, err := url.PathUnescape(seg[2])
		return seg[1] + "/" + id, err == nil
	}
	if strings.HasPrefix(seg[1], "_") {
		return "", false
	}
	id, err := url.PathUnescape(seg[1])
	return id, err == nil
}

// rejectBulk removes the chosen documents from a _bulk_docs body, forwards
// the rest (if any) and adds a forbidden row per removed document to the
// answer.
func (p *Proxy) rejectBulk(w http.ResponseWriter, r *http.Request, body []byte, rule *compiledRule) {
	var req map[string]json.RawMessage
	var docs []json.RawMessage
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["docs"], &docs) != nil {
		p.pass(w, r, body)
		return
	}
	kept := make([]json.RawMessage, 0, len(docs))
	var rows []json.RawMessage
	for _, d := range docs {
		var env struct {
			ID  string `json:"_id"`
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(d, &env) == nil && rule.ids[env.ID] {
			row, _ := json.Marshal(map[string]string{"id": env.ID, "rev": env.Rev, "error": "forbidden", "reason": rule.Reason})
			rows = append(rows, row)
			continue
		}
		kept = append(kept, d)
	}
	if len(rows) == 0 {
		p.pass(w, r, body)
		return
	}
	rule.c.fired.Add(1)
	rule.c.docs.Add(int64(len(rows)))
	p.faults.Add(1)
	if len(kept) == 0 {
		out, _ := json.Marshal(rows)
		writeBody(w, nil, http.StatusCreated, out)
		return
	}
	req["docs"], _ = json.Marshal(kept)
	newBody, _ := json.Marshal(req)
	resp, data, ok := p.readAnswer(w, r, newBody)
	if !ok {
		return
	}
	var answer []json.RawMessage
	if resp.StatusCode/100 != 2 || json.Unmarshal(data, &answer) != nil {
		writeBody(w, resp.Header, resp.StatusCode, data)
		return
	}
	out, _ := json.Marshal(append(answer, rows...))
	writeBody(w, resp.Header, resp.StatusCode, out)
}
