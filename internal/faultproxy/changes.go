package faultproxy

import (
	"bufio"
	"bytes"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
)

// cutChanges passes a changes answer on up to the end of rule.CutRows rows
// or rule.CutBytes bytes and then aborts the connection, so the client gets
// neither the closing bracket nor last_seq. Answers other than 200 pass
// unchanged.
func (p *Proxy) cutChanges(w http.ResponseWriter, r *http.Request, body []byte, rule *compiledRule) {
	if r.URL.Query().Get("feed") == "continuous" {
		p.cutContinuous(w, r, body, rule)
		return
	}
	resp, data, ok := p.readAnswer(w, r, body)
	if !ok {
		return
	}
	if resp.StatusCode != http.StatusOK {
		writeBody(w, resp.Header, resp.StatusCode, data)
		return
	}
	cut := int64(len(data)) - 1
	if rule.CutRows > 0 {
		if off, ok := rowsEnd(data, rule.CutRows); ok {
			cut = off
		}
	} else if rule.CutBytes < cut {
		cut = rule.CutBytes
	}
	copyHeader(w.Header(), resp.Header)
	w.Header().Del("Content-Length")
	w.Header().Del("Etag")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data[:cut])
	if rule.CloseJSON && rule.CutRows > 0 {
		_, _ = w.Write([]byte("]}\n"))
		return
	}
	_, _ = w.Write([]byte("\n"))
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler) // closes the connection mid-answer
}

// rowsEnd returns the offset just after the n-th row of a normal or
// longpoll changes answer ({"results":[row,...],"last_seq":...}), or after
// the last row when there are fewer; ok is false if data is not such an
// answer.
func rowsEnd(data []byte, n int) (int64, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, false
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return 0, false
		}
		if name.String() != "results" {
			if err := dec.SkipValue(); err != nil {
				return 0, false
			}
			continue
		}
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
			return 0, false
		}
		off := dec.InputOffset()
		for i := 0; i < n && dec.PeekKind() != ']'; i++ {
			if err := dec.SkipValue(); err != nil {
				return 0, false
			}
			off = dec.InputOffset()
		}
		return off, true
	}
	return 0, false
}

// cutContinuous streams a continuous feed line by line and aborts after
// rule.CutRows non-blank lines (or rule.CutBytes bytes).
func (p *Proxy) cutContinuous(w http.ResponseWriter, r *http.Request, body []byte, rule *compiledRule) {
	resp, err := p.forward(r, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "bad_gateway", "faultproxy: target unreachable", "")
		return
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header)
	w.Header().Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	br := bufio.NewReader(resp.Body)
	rows, sent := 0, int64(0)
	for {
		line, err := br.ReadBytes('\n')
		if rule.CutRows <= 0 && rule.CutBytes > 0 && sent+int64(len(line)) > rule.CutBytes {
			line = line[:rule.CutBytes-sent]
			_, _ = w.Write(line)
			_ = rc.Flush()
			panic(http.ErrAbortHandler)
		}
		if len(line) > 0 {
			_, _ = w.Write(line)
			_ = rc.Flush()
			sent += int64(len(line))
		}
		if len(bytes.TrimSpace(line)) > 0 {
			rows++
			if rule.CutRows > 0 && rows >= rule.CutRows {
				panic(http.ErrAbortHandler)
			}
		}
		if err != nil {
			panic(http.ErrAbortHandler)
		}
	}
}
