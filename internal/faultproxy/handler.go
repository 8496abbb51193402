package faultproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDrain bounds how much of an oversized request body is read (and
// dropped) before the 413 answer, so that clients see the answer rather
// than a broken pipe.
const maxDrain = 256 << 20

// ServeHTTP handles one proxied request: limits, then the first rule that
// fires, then forwarding.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		m := p.maxInFlight.Load()
		if n <= m || p.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if ok, retryAfter, dbsActive := p.admit(n); !ok {
		p.throttled.Add(1)
		p.faults.Add(1)
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDrain))
		if dbsActive {
			writeError(w, http.StatusInternalServerError, "error", "all_dbs_active", "")
			return
		}
		writeError(w, http.StatusTooManyRequests, "", "", retryAfter)
		return
	}
	if rule := p.pick(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, true); rule != nil {
		p.faults.Add(1)
		_, _ = io.CopyN(io.Discard, r.Body, int64(rule.CutBytes))
		if rule.Fault == StallMidRequest {
			// the server cannot tell that the client left while the
			// body is unread: the request ends when the proxy stops
			<-p.stopped
			return
		}
		resetConn(w)
		return
	}
	body, err := readBody(r, p.maxBody())
	if err == errTooLarge {
		p.tooLarge.Add(1)
		p.faults.Add(1)
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "the request entity is too large", "")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "faultproxy: reading request body failed", "")
		return
	}

	rule := p.pick(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, false)
	if rule != nil && rule.Delay > 0 {
		t := time.NewTimer(rule.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			rule.c.gone.Add(1)
			return
		}
	}
	if rule == nil || rule.Fault == Forward {
		p.pass(w, r, body)
		return
	}
	if rule.Fault != RejectDocs {
		p.faults.Add(1)
	}
	switch rule.Fault {
	case Status:
		if rule.Body != "" {
			if rule.RetryAfter != "" {
				w.Header().Set("Retry-After", rule.RetryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rule.Status)
			_, _ = io.WriteString(w, rule.Body)
			return
		}
		writeError(w, rule.Status, "", "", rule.RetryAfter)
	case Reset:
		resetConn(w)
	case ResetAfterForward:
		if resp, err := p.forward(r, body); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		resetConn(w)
	case ResetMidBody:
		p.resetMidBody(w, r, body, rule.CutBytes)
	case StallMidBody:
		p.stallMidBody(w, r, body, rule)
	case CutChanges:
		p.cutChanges(w, r, body, rule)
	case RejectDocs:
		p.rejectDocs(w, r, body, rule)
	case DropLast:
		p.dropLast(w, r, body)
	case DropResults:
		p.dropResults(w, r, body, rule.CutRows)
	}
}

// readBody reads the whole request body, or returns errTooLarge (after
// draining at most maxDrain bytes) when it exceeds limit > 0.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if limit > 0 && r.ContentLength > limit {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDrain))
		return nil, errTooLarge
	}
	rd := io.Reader(r.Body)
	if limit > 0 {
		rd = io.LimitReader(r.Body, limit+1)
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(b)) > limit {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDrain))
		return nil, errTooLarge
	}
	return b, nil
}

// forward sends the request with body to the target. The raw request
// target is kept byte for byte (escaped ids stay escaped exactly as the
// client sent them).
func (p *Proxy) forward(r *http.Request, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.Scheme+"://"+p.target.Host+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.URL.Path = ""
	out.URL.Opaque = r.URL.EscapedPath()
	if raw := r.RequestURI; strings.HasPrefix(raw, "/") {
		path, _, _ := strings.Cut(raw, "?")
		out.URL.Opaque = path
	}
	out.URL.RawQuery = r.URL.RawQuery
	if p.keepHost.Load() {
		out.Host = r.Host
	}
	copyHeader(out.Header, r.Header)
	if p.auth != nil && out.Header.Get("Authorization") == "" {
		pw, _ := p.auth.Password()
		out.SetBasicAuth(p.auth.Username(), pw)
	}
	if !p.keepHost.Load() { // a signed request keeps its headers as they were signed
		out.Header.Del("Accept-Encoding")
	}
	out.ContentLength = int64(len(body))
	if len(body) == 0 {
		out.Body = http.NoBody
	}
	return p.transport.RoundTrip(out)
}

// pass forwards and streams the answer back, flushing as it goes so that
// continuous feeds work.
func (p *Proxy) pass(w http.ResponseWriter, r *http.Request, body []byte) {
	resp, err := p.forward(r, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "bad_gateway", "faultproxy: target unreachable", "")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusInternalServerError {
		p.upstream500.Add(1)
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// readAnswer forwards and reads the whole answer.
func (p *Proxy) readAnswer(w http.ResponseWriter, r *http.Request, body []byte) (*http.Response, []byte, bool) {
	resp, err := p.forward(r, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "bad_gateway", "faultproxy: target unreachable", "")
		return nil, nil, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		resetConn(w)
		return nil, nil, false
	}
	return resp, data, true
}

func (p *Proxy) resetMidBody(w http.ResponseWriter, r *http.Request, body []byte, cut int64) {
	if p.sendPart(w, r, body, cut) {
		resetConn(w)
	}
}

// sendPart forwards the request and sends the answer's headers (with its
// full Content-Length) and its first cut bytes (at most all but one); it
// reports whether it did.
func (p *Proxy) sendPart(w http.ResponseWriter, r *http.Request, body []byte, cut int64) bool {
	resp, data, ok := p.readAnswer(w, r, body)
	if !ok {
		return false
	}
	cut = min(max(cut, 0), int64(len(data))-1)
	copyHeader(w.Header(), resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(resp.StatusCode)
	if cut > 0 {
		_, _ = w.Write(data[:cut])
	}
	_ = http.NewResponseController(w).Flush()
	return true
}

// stallMidBody sends the answer's headers and first rule.CutBytes bytes,
// then holds the connection open until the client gives up or the proxy
// stops.
func (p *Proxy) stallMidBody(w http.ResponseWriter, r *http.Request, body []byte, rule *compiledRule) {
	if !p.sendPart(w, r, body, rule.CutBytes) {
		return
	}
	select {
	case <-r.Context().Done():
		rule.c.gone.Add(1)
	case <-p.stopped:
	}
}

// writeBody answers with status and a complete JSON body.
func writeBody(w http.ResponseWriter, h http.Header, status int, data []byte) {
	copyHeader(w.Header(), h)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// writeError answers with a CouchDB-style {"error","reason"} body; empty
// name and reason are derived from the status.
func writeError(w http.ResponseWriter, status int, name, reason, retryAfter string) {
	if name == "" {
		name = errorName(status)
	}
	if reason == "" {
		reason = "injected by faultproxy: " + http.StatusText(status)
	}
	b, _ := json.Marshal(map[string]string{"error": name, "reason": reason})
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeBody(w, nil, status, append(b, '\n'))
}

func errorName(status int) string {
	switch status {
	case 400:
		return "bad_request"
	case 401:
		return "unauthorized"
	case 403:
		return "forbidden"
	case 404:
		return "not_found"
	case 409:
		return "conflict"
	case 412:
		return "precondition_failed"
	case 413:
		return "too_large"
	case 415:
		return "bad_content_type"
	case 429:
		return "too_many_requests"
	case 503:
		return "service_unavailable"
	}
	if status >= 500 {
		return "unknown_error"
	}
	return strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
}

// resetConn takes over the client connection and closes it with a TCP
// reset (SO_LINGER 0). If the connection cannot be taken over, the handler
// aborts, which closes it.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// dropLast forwards and removes the last element of a JSON array answer
// that holds as many elements as the request's limit asked for; other
// answers pass unchanged.
func (p *Proxy) dropLast(w http.ResponseWriter, r *http.Request, body []byte) {
	resp, data, ok := p.readAnswer(w, r, body)
	if !ok {
		return
	}
	var arr []json.RawMessage
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit > 0 && resp.StatusCode == http.StatusOK && json.Unmarshal(data, &arr) == nil && len(arr) >= limit {
		if out, err := json.Marshal(arr[:len(arr)-1]); err == nil {
			data = out
		}
	}
	writeBody(w, resp.Header, resp.StatusCode, data)
}

// dropResults forwards the request and removes the first n elements of
// the `results` array of a JSON object answer.
func (p *Proxy) dropResults(w http.ResponseWriter, r *http.Request, body []byte, n int) {
	resp, data, ok := p.readAnswer(w, r, body)
	if !ok {
		return
	}
	var obj map[string]json.RawMessage
	var results []json.RawMessage
	if resp.StatusCode == http.StatusOK && json.Unmarshal(data, &obj) == nil && json.Unmarshal(obj["results"], &results) == nil {
		results = results[min(n, len(results)):]
		if b, err := json.Marshal(results); err == nil {
			obj["results"] = b
			if out, err := json.Marshal(obj); err == nil {
				data = out
			}
		}
	}
	writeBody(w, resp.Header, resp.StatusCode, data)
}
