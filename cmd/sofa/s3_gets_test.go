package main

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/s3test"
	"github.com/sofadb/sofa/storage/s3"
)

// TestS3_RestoreGets: a whole-server restore of a 50-database archive
// from s3:// (its groups read at their offsets, several at once) sends
// about one ranged GET per group plus one per part of the archive, not
// one per small read of the tar reader: counted at the fault proxy in
// front of versitygw. The restored server equals the source.
func TestS3_RestoreGets(t *testing.T) {
	bin, s3srv, bucket, p, src := s3Proxied(t)
	const dbs = 50
	var names []string
	for i := range dbs {
		db := fmt.Sprintf("db-%02d", i)
		names = append(names, db)
		docs := arSmallDocs("d", 20+i)
		if i%5 == 0 {
			docs = append(docs, s3AttDocs("a", 2, 40<<10)...)
		}
		arCreate(t, src, db, true, docs...)
	}
	// and one large group: attachments of 1.5 MiB and many small documents
	arCreate(t, src, "big", true, append(s3AttDocs("b", 4, 1536<<10), arSmallDocs("s", 2000)...)...)
	names = append(names, "big")
	env := s3srv.Env()
	key := "gets/all.sofa"
	loc := "s3://" + bucket + "/" + key
	s3Sofa(t, bin, env, "backup", src.URL, loc, "-q").want(t, exitOK)
	head, err := s3test.Client(s3srv.URL).HeadObject(t.Context(), &awss3.HeadObjectInput{Bucket: &bucket, Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	size := aws.ToInt64(head.ContentLength)

	if err := p.SetRules(faultproxy.Rule{Name: "get", Method: "GET"}); err != nil {
		t.Fatal(err)
	}
	tgt := couchtest.Start(t)
	s3Sofa(t, bin, append(env, "SOFA_S3_ENDPOINT="+p.URL), "restore", loc, tgt.URL, "-q").want(t, exitOK)
	gets := p.Rule("get").Matched
	parts := (size + s3.DefaultPartSize - 1) / s3.DefaultPartSize
	// The archive's header, index and manifest (read by the plan and the
	// scan: 9 GETs here), each small group in one GET (archive.ReadSize,
	// 4 MiB, is more than its span), the large one in a few.
	// Before groups were read through a buffer: 1063 GETs.
	const overhead = 12
	bound := parts + int64(len(names)) + overhead
	t.Logf("restore of %d databases, archive %d bytes (%d parts of %d): %d GETs (bound %d)", len(names), size, parts, s3.DefaultPartSize, gets, bound)
	if gets > bound {
		t.Errorf("restore sent %d GETs, want at most %d (parts %d + groups %d + %d)", gets, bound, parts, len(names), overhead)
	}
	for _, db := range names {
		couchtest.AssertEqual(t, src.DBURL(db), tgt.DBURL(db))
	}
}
