package faultproxy

import (
	"fmt"
	"regexp"
	"sync/atomic"
	"time"
)

// Fault is what a matching Rule does to a request.
type Fault int

const (
	// Forward passes the request on unchanged (after Rule.Delay); use it
	// for pure delays.
	Forward Fault = iota
	// Status answers Rule.Status without contacting the target, with
	// Rule.Body (default: a CouchDB JSON error for the status) and
	// Rule.RetryAfter as the Retry-After header when set.
	Status
	// Reset closes the connection with a TCP reset before any answer; the
	// request does not reach the target.
	Reset
	// ResetAfterForward forwards the request, drops the target's answer
	// and resets the connection: the write happened but the client cannot
	// know.
	ResetAfterForward
	// ResetMidBody forwards the request, sends the answer's headers (with
	// its full Content-Length) and its first Rule.CutBytes bytes, then
	// resets the connection.
	ResetMidBody
	// CutChanges forwards the request and sends the answer only up to the
	// end of its first Rule.CutRows rows (normal, longpoll and continuous
	// feeds) or its first Rule.CutBytes bytes, then closes the connection:
	// no last_seq, and the client sees an unexpected end of body.
	CutChanges
	// RejectDocs strips the documents whose _id is in Rule.DocIDs from a
	// POST _bulk_docs body before forwarding it and adds
	// {"id","rev","error":"forbidden","reason"} rows for them to the
	// answer; a PUT of such a document (or of one of its attachments) is
	// answered 403 {"error":"forbidden"} without forwarding. Other
	// requests pass unchanged.
	RejectDocs
	// DropLast forwards the request and, when it carries a limit and the
	// answer is a JSON array (GET /_all_dbs) as long as the limit, removes
	// the array's last element: CouchDB 3.2.0 answers limit-1 names.
	DropLast
	// ResetMidRequest reads the first Rule.CutBytes bytes of the request
	// body, then resets the connection: the client sees its upload (an S3
	// part) fail while it sends it. Such rules are looked at before the
	// body is read, ahead of every other rule; their Delay is ignored.
	ResetMidRequest
	// StallMidRequest reads the first Rule.CutBytes bytes of the request
	// body, then reads nothing more and answers nothing until the proxy
	// stops: the client's upload stalls while it sends it. Looked at
	// early, like ResetMidRequest; Delay is ignored.
	StallMidRequest
	// DropResults forwards the request and removes the first
	// Rule.CutRows elements of the `results` array of its JSON answer
	// (POST _bulk_get): an answer that leaves documents out.
	DropResults
	// StallMidBody forwards the request, sends the answer's headers (with
	// its full Content-Length) and its first Rule.CutBytes bytes, then
	// sends nothing more, with the connection open, until the client
	// gives up (counted in RuleStats.Gone) or the proxy stops.
	StallMidBody
)

// early is true for the faults tried before the request body is read.
func (f Fault) early() bool { return f == ResetMidRequest || f == StallMidRequest }

func (f Fault) String() string {
	switch f {
	case Forward:
		return "forward"
	case Status:
		return "status"
	case Reset:
		return "reset"
	case ResetAfterForward:
		return "reset-after-forward"
	case ResetMidBody:
		return "reset-mid-body"
	case CutChanges:
		return "cut-changes"
	case RejectDocs:
		return "reject-docs"
	case DropLast:
		return "drop-last"
	case ResetMidRequest:
		return "reset-mid-request"
	case StallMidRequest:
		return "stall-mid-request"
	case StallMidBody:
		return "stall-mid-body"
	case DropResults:
		return "drop-results"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Rule selects requests and says what to do with them. Rules are tried in
// order; the first one that matches and fires handles the request.
type Rule struct {
	// Name keys the rule's counters (Stats.Rules); empty means "rule N"
	// after its position.
	Name string
	// Method matches the request method exactly; empty matches any.
	Method string
	// Path is a regexp matched against the escaped request path (as sent
	// on the wire, without the query), e.g. `/_changes$`; empty matches
	// any.
	Path string
	// Query is a regexp matched against the raw query string (without
	// "?"), e.g. `feed=continuous`; empty matches any.
	Query string
	// After lets the first After matching requests through untouched.
	After int
	// Times caps how often the rule fires; zero means no cap.
	Times int
	// Probability that a matching request fires the rule; 0 and 1 both
	// mean always.
	Probability float64

	// Delay is waited before the fault (and before forwarding). A client
	// that gives up meanwhile ends the request.
	Delay time.Duration
	// Fault is what happens after the delay.
	Fault Fault

	// Status and Body are the answer of the Status fault; an empty Body
	// becomes a CouchDB-style {"error","reason"} object for the status.
	Status int
	Body   string
	// RetryAfter is the Retry-After header value of the Status fault
	// (seconds, e.g. "1"); empty sends none.
	RetryAfter string
	// CutRows and CutBytes bound what CutChanges and ResetMidBody pass on;
	// for CutChanges CutRows wins when both are set.
	CutRows  int
	CutBytes int64
	// CloseJSON makes CutChanges end a cut normal feed as well-formed
	// JSON (`]}` after the rows kept, still without last_seq) and the
	// body cleanly, as a proxy that rewrites answers might: the client
	// sees a complete answer that lacks last_seq.
	CloseJSON bool
	// DocIDs and Reason configure RejectDocs; Reason defaults to
	// "rejected by faultproxy".
	DocIDs []string
	Reason string
}

// RuleStats are the counters of one rule.
type RuleStats struct {
	// Matched counts requests that matched Method and Path.
	Matched int64
	// Fired counts requests the rule acted on.
	Fired int64
	// Docs counts documents rejected by a RejectDocs rule.
	Docs int64
	// Gone counts requests whose client gave up during the rule's Delay
	// (they were not forwarded) or during a StallMidBody.
	Gone int64
}

type ruleCounters struct {
	matched, fired, docs, gone atomic.Int64
}

type compiledRule struct {
	Rule
	path  *regexp.Regexp
	query *regexp.Regexp
	ids   map[string]bool
	c     *ruleCounters
}

func compile(r Rule, i int) (*compiledRule, error) {
	cr := &compiledRule{Rule: r}
	if cr.Name == "" {
		cr.Name = fmt.Sprintf("rule %d", i)
	}
	if r.Path != "" {
		re, err := regexp.Compile(r.Path)
		if err != nil {
			return nil, fmt.Errorf("faultproxy: rule %q: path: %w", cr.Name, err)
		}
		cr.path = re
	}
	if r.Query != "" {
		re, err := regexp.Compile(r.Query)
		if err != nil {
			return nil, fmt.Errorf("faultproxy: rule %q: query: %w", cr.Name, err)
		}
		cr.query = re
	}
	if r.Fault == Status && (r.Status < 100 || r.Status > 999) {
		return nil, fmt.Errorf("faultproxy: rule %q: Status fault needs a status code, got %d", cr.Name, r.Status)
	}
	if r.Fault == CutChanges && r.CutRows <= 0 && r.CutBytes <= 0 {
		return nil, fmt.Errorf("faultproxy: rule %q: CutChanges needs CutRows or CutBytes", cr.Name)
	}
	if r.Fault == RejectDocs {
		cr.ids = make(map[string]bool, len(r.DocIDs))
		for _, id := range r.DocIDs {
			cr.ids[id] = true
		}
		if cr.Reason == "" {
			cr.Reason = "rejected by faultproxy"
		}
	}
	return cr, nil
}

func (r *compiledRule) matches(method, path, query string) bool {
	if r.Method != "" && r.Method != method {
		return false
	}
	return (r.path == nil || r.path.MatchString(path)) && (r.query == nil || r.query.MatchString(query))
}
