package couchtest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// CompareOptions tunes CompareDBs. The zero value compares documents only.
type CompareOptions struct {
	// Security also compares the databases' _security objects (missing
	// sections count as empty; names and roles compare as sets).
	Security bool
	// RevsLimit also compares _revs_limit; a 404 from a PouchDB Server
	// (it has no such route) skips the check, from any other server it is
	// an error.
	RevsLimit bool
	// IgnoreRevisions skips comparing each leaf's _revisions history.
	IgnoreRevisions bool
	// PouchDBRevpos accepts, on a PouchDB Server target, an attachment
	// revpos equal to the generation of the revision that carries it:
	// PouchDB Server resets revpos to that generation whenever it receives
	// attachment bytes (pouchdb-adapter-leveldb-core saveAttachment), so a
	// copy of an attachment introduced earlier cannot keep its revpos there.
	// The target's kind is read from its welcome (GET /): on any other
	// target revpos must be equal.
	PouchDBRevpos bool
	// DigestsByKind skips comparing attachment digests (the bytes, length
	// and content_type are still compared): for a CouchDB and a PouchDB
	// Server database, whose digests of the same bytes differ (CouchDB's is
	// the md5 of the gzip bytes it stores for compressible types).
	DigestsByKind bool
	// MaxItems caps Diff.Items; zero means 20.
	MaxItems int
	// BatchSize is the number of revisions per _bulk_get request; zero
	// means 50.
	BatchSize int
	// HTTP is the client used for both databases; nil means a default one.
	HTTP *http.Client
}

// Diff is the outcome of CompareDBs.
type Diff struct {
	// Items describes the first differences found, one per line, ids
	// shortened to 80 bytes.
	Items []string
	// Total counts all differences, including those not kept in Items.
	Total int
	// Docs is the number of document ids in the source; Revs the number of
	// leaf revisions whose bodies were compared.
	Docs int
	Revs int

	max int
}

// Equal reports whether no difference was found.
func (d *Diff) Equal() bool { return d.Total == 0 }

// String lists the differences, or says the databases are equal.
func (d *Diff) String() string {
	if d.Equal() {
		return fmt.Sprintf("equal (%d docs, %d leaf revisions)", d.Docs, d.Revs)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d differences (%d docs, %d leaf revisions compared)", d.Total, d.Docs, d.Revs)
	for _, it := range d.Items {
		b.WriteString("\n  ")
		b.WriteString(it)
	}
	if n := d.Total - len(d.Items); n > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more", n)
	}
	return b.String()
}

func (d *Diff) addf(format string, args ...any) {
	d.Total++
	if len(d.Items) < d.max {
		d.Items = append(d.Items, fmt.Sprintf(format, args...))
	}
}

// CompareDBs compares the database at srcURL with the one at dstURL (each a
// database URL; credentials as userinfo are used and never reported) for
// "Equal": the same document ids; per id the same leaf revisions, winner and
// deleted state; per common leaf the same body as canonical JSON (RFC 8785),
// the same _revisions (unless IgnoreRevisions) and the same attachments
// (names, content_type, digest, revpos, bytes, and length where given); and,
// when asked, _security and _revs_limit. Leaves are fetched with POST
// _bulk_get (explicit revs, so ids of any length work), falling back to GET
// open_revs where _bulk_get is missing. The error is for failed requests
// only; differences go into Diff.
func CompareDBs(ctx context.Context, srcURL, dstURL string, opts CompareOptions) (*Diff, error) {
	if opts.MaxItems <= 0 {
		opts.MaxItems = 20
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 50
	}
	src, dst := NewClient(srcURL), NewClient(dstURL)
	src.HTTP, dst.HTTP = opts.HTTP, opts.HTTP
	d := &Diff{max: opts.MaxItems}
	if opts.PouchDBRevpos {
		pouch, err := isPouchDB(ctx, dstURL, opts.HTTP)
		if err != nil {
			return nil, fmt.Errorf("target: %w", err)
		}
		opts.PouchDBRevpos = pouch
	}

	srcDocs, err := listDocs(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	dstDocs, err := listDocs(ctx, dst)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	d.Docs = len(srcDocs)

	var pairs []revRef
	for _, id := range sortedKeys(srcDocs) {
		s := srcDocs[id]
		t, ok := dstDocs[id]
		if !ok {
			d.addf("doc %s: missing on target", short(id))
			continue
		}
		if !slices.Equal(s.leaves, t.leaves) {
			d.addf("doc %s: leaves differ: source %v, target %v", short(id), s.leaves, t.leaves)
		}
		if s.winner != t.winner {
			d.addf("doc %s: winner differs: source %s, target %s", short(id), s.winner, t.winner)
		}
		if s.deleted != t.deleted {
			d.addf("doc %s: deleted differs: source %t, target %t", short(id), s.deleted, t.deleted)
		}
		for _, rev := range s.leaves {
			if slices.Contains(t.leaves, rev) {
				pairs = append(pairs, revRef{ID: id, Rev: rev})
			}
		}
	}
	for _, id := range sortedKeys(dstDocs) {
		if _, ok := srcDocs[id]; !ok {
			d.addf("doc %s: only on target", short(id))
		}
	}

	for start := 0; start < len(pairs); start += opts.BatchSize {
		batch := pairs[start:min(start+opts.BatchSize, len(pairs))]
		sb, err := fetchRevs(ctx, src, batch)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		tb, err := fetchRevs(ctx, dst, batch)
		if err != nil {
			return nil, fmt.Errorf("target: %w", err)
		}
		for _, p := range batch {
			d.Revs++
			compareRev(d, p, sb[p], tb[p], opts)
		}
	}

	if opts.Security {
		if err := compareSecurity(ctx, d, src, dst); err != nil {
			return nil, err
		}
	}
	if opts.RevsLimit {
		if err := compareRevsLimit(ctx, d, src, dst, srcURL, dstURL, opts.HTTP); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// AssertEqual fails t with a readable list of differences unless the two
// databases are equal (see CompareDBs; at most one opts is used).
func AssertEqual(t testing.TB, srcDBURL, dstDBURL string, opts ...CompareOptions) {
	t.Helper()
	var o CompareOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	d, err := CompareDBs(t.Context(), srcDBURL, dstDBURL, o)
	if err != nil {
		t.Fatalf("compare databases: %v", err)
	}
	if !d.Equal() {
		t.Errorf("databases differ: %s", d)
	}
}

func short(id string) string {
	if len(id) > 80 {
		return fmt.Sprintf("%q...(%d bytes)", id[:80], len(id))
	}
	return fmt.Sprintf("%q", id)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
