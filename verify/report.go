package verify

import (
	"fmt"
	"strings"
)

// Mode selects how deep Compare looks.
type Mode int

const (
	// Cheap compares doc counts, ids, leaf revision sets and the winner's
	// deleted state.
	Cheap Mode = iota
	// Full also compares every common leaf's body, history, deleted flag
	// and attachment metadata.
	Full
)

func (m Mode) String() string {
	if m == Full {
		return "full"
	}
	return "cheap"
}

// Kind names one sort of difference.
type Kind string

// Kinds of difference. A is the first database given to Compare, B the
// second.
const (
	KindNoDatabase  Kind = "no_database" // one side does not exist
	KindOnlyInB     Kind = "only_in_b"   // a whole database only B holds (server comparisons)
	KindDocCount    Kind = "doc_count"   // doc_count or doc_del_count differ
	KindMissing     Kind = "missing"     // document only in A
	KindExtra       Kind = "extra"       // document only in B
	KindMissingRev  Kind = "missing_rev" // leaf revision only in A
	KindExtraRev    Kind = "extra_rev"   // leaf revision only in B
	KindDeleted     Kind = "deleted"     // winner's (or a leaf's) deleted state differs
	KindBody        Kind = "body"        // leaf body differs as canonical JSON
	KindHistory     Kind = "history"     // _revisions differ where both keep them
	KindAttachment  Kind = "attachment"  // attachment missing or its metadata differs
	KindUnreadable  Kind = "unreadable"  // a leaf could not be read from one side
	KindSecurity    Kind = "security"    // _security differs
	KindRevsLimit   Kind = "revs_limit"  // _revs_limit differs
	KindPartitioned Kind = "partitioned" // props.partitioned differs
)

// Difference is one thing that is not equal. ID and Rev are empty for
// database-level differences.
type Difference struct {
	Kind   Kind   `json:"kind"`
	ID     string `json:"id,omitempty"`
	Rev    string `json:"rev,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func (d Difference) String() string {
	var b strings.Builder
	b.WriteString(string(d.Kind))
	if d.ID != "" {
		fmt.Fprintf(&b, " id=%q", shortID(d.ID))
	}
	if d.Rev != "" {
		b.WriteString(" rev=" + d.Rev)
	}
	if d.Detail != "" {
		b.WriteString(": " + d.Detail)
	}
	return b.String()
}

// Counts are what `GET /db` says.
type Counts struct {
	DocCount int64 `json:"doc_count"`
	DelCount int64 `json:"doc_del_count"`
	// DelCountUnknown: the server did not report doc_del_count (PouchDB
	// Server); only doc_count is compared then.
	DelCountUnknown bool `json:"doc_del_count_unknown,omitempty"`
}

// Report is the outcome of Compare.
type Report struct {
	Mode string `json:"mode"` // "cheap" or "full"
	// A and B are the doc counts each side reported.
	A Counts `json:"a"`
	B Counts `json:"b"`
	// Docs counts the document ids of A; Leaves the leaf revisions whose
	// contents were compared (Full only).
	Docs   int64 `json:"docs"`
	Leaves int64 `json:"leaves"`
	// Total counts every difference found; ByKind splits it by kind.
	Total  int          `json:"total"`
	ByKind map[Kind]int `json:"by_kind,omitempty"`
	// Differences holds the first Options.MaxDifferences of them, in the
	// order found.
	Differences []Difference `json:"differences"`
	// OtherWinners counts, with Options.AllowExtra, the documents whose
	// winner is deleted on one side and live on the other because B holds
	// leaves of its own (not differences: B may hold more; but a reader
	// of B sees the document in another state: a conflict of B's own, or
	// a history stemmed by A's _revs_limit copied as a new branch);
	// OtherWinnerIDs lists the first of them.
	OtherWinners   int      `json:"other_winners,omitempty"`
	OtherWinnerIDs []string `json:"other_winner_ids,omitempty"`

	max int
}

// maxOtherWinnerIDs bounds Report.OtherWinnerIDs.
const maxOtherWinnerIDs = 10

func (r *Report) otherWinner(id string) {
	r.OtherWinners++
	if len(r.OtherWinnerIDs) < maxOtherWinnerIDs {
		r.OtherWinnerIDs = append(r.OtherWinnerIDs, id)
	}
}

// Equal reports whether no difference was found.
func (r *Report) Equal() bool { return r.Total == 0 }

// Truncated is the number of differences counted but not listed.
func (r *Report) Truncated() int { return r.Total - len(r.Differences) }

func (r *Report) add(d Difference) {
	r.Total++
	if r.ByKind == nil {
		r.ByKind = map[Kind]int{}
	}
	r.ByKind[d.Kind]++
	if len(r.Differences) < r.max {
		r.Differences = append(r.Differences, d)
	}
}

func (r *Report) addf(kind Kind, id, rev, format string, args ...any) {
	r.add(Difference{Kind: kind, ID: id, Rev: rev, Detail: fmt.Sprintf(format, args...)})
}

// String is a one-line summary.
func (r *Report) String() string {
	if r.Equal() {
		s := fmt.Sprintf("equal (%s: %d docs", r.Mode, r.Docs)
		if r.Mode == "full" {
			s += fmt.Sprintf(", %d leaf revisions", r.Leaves)
		}
		return s + ")"
	}
	s := fmt.Sprintf("%d differences (%s", r.Total, r.Mode)
	if r.Docs > 0 {
		s += fmt.Sprintf(": %d docs", r.Docs)
	}
	if r.Leaves > 0 {
		s += fmt.Sprintf(", %d leaf revisions compared", r.Leaves)
	}
	return s + ")"
}

// shortID keeps error lines readable for very long ids.
func shortID(id string) string {
	if len(id) > 120 {
		return fmt.Sprintf("%s...(%d bytes)", id[:100], len(id))
	}
	return id
}
