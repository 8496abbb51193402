package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/s3test"
)

// TestS3_RestoreReadsInOrder: a restore from s3:// reads the object in
// order with part-sized ranged GETs (as verify does), not one request
// per archive member: scanning the tar headers at their offsets and
// reading each database group through ReadAt cost one GET (and the
// proxy's latency) per header and per small read, which made a restore
// of 47 MiB from S3 15 times slower than from a local file
// (scripts/bench.sh s3).
func TestS3_RestoreReadsInOrder(t *testing.T) {
	bin, s3srv, bucket, p, src := s3Proxied(t)
	arCreate(t, src, "media", true, s3AttDocs("m", 80, 40<<10)...)
	arCreate(t, src, "notes", true, arSmallDocs("n", 300)...)
	arCreate(t, src, "big", true, s3AttDocs("b", 6, 1<<20)...)

	env := append(s3srv.Env(), "SOFA_S3_ENDPOINT="+p.URL)
	const part = 5 << 20
	flags := []string{"--part-size", "5242880", "--transfers", "2"}
	key := "s3://" + bucket + "/full.sofa"
	s3Sofa(t, bin, env, append([]string{"backup", src.URL, key, "-q"}, flags...)...).want(t, exitOK)
	obj, err := s3test.Client(s3srv.URL).HeadObject(t.Context(), &awss3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("full.sofa")})
	if err != nil {
		t.Fatal(err)
	}
	size := aws.ToInt64(obj.ContentLength)

	tgt := couchtest.Start(t)
	p.ResetStats()
	s3Sofa(t, bin, env, append([]string{"restore", key, tgt.URL, "-q"}, flags...)...).want(t, exitOK)
	for _, db := range []string{"media", "notes", "big"} {
		arEqual(t, src, db, tgt, db)
	}
	// the object's parts, plus a handful (HEAD, a ranged GET or two
	// for the archive's header and index), plus a few per database where
	// the restore leaves some of the archive's databases out (the system
	// databases: then only the selected groups are read, each through a
	// buffer of up to 4 MiB). One request per member was 580.
	parts := (size + part - 1) / part
	if got, limit := p.Stats().Requests, parts+8+4*3; got > limit {
		t.Errorf("restore of a %d-byte object (%d parts) sent %d requests, want at most %d", size, parts, got, limit)
	}
}

// TestS3_RestoreLargeGroupsAtOnce: an archive in s3:// of a few large
// database groups is restored several databases at once, each read at
// its offsets, not one after the other in order (which bounded the
// restore by one database's ingest into the target, whatever the
// read-ahead); the copy equals the source.
func TestS3_RestoreLargeGroupsAtOnce(t *testing.T) {
	bin := sofaBin(t)
	s3srv := s3test.Start(t)
	bucket := s3srv.Bucket(t)
	src := couchtest.Start(t)
	dbs := []string{"media-a", "media-b", "media-c"}
	for _, db := range dbs {
		arCreate(t, src, db, true, s3AttDocs("m", 5, 2<<20)...)
	}
	env := s3srv.Env()
	key := "s3://" + bucket + "/large.sofa"
	s3Sofa(t, bin, env, "backup", src.URL, key, "-q").want(t, exitOK)
	tgt := couchtest.Start(t)
	r := s3Sofa(t, bin, env, "restore", key, tgt.URL, "--json")
	r.want(t, exitOK)
	if peak := r.summary(t).Concurrency.Peak; peak < 2 {
		t.Errorf("databases restored at once: peak %d, want several", peak)
	}
	for _, db := range dbs {
		arEqual(t, src, db, tgt, db)
	}
}

// TestS3_RestoreReadsAhead: a restore from s3:// of one large database
// group reads it at its offsets with up to --transfers ranged GETs in
// flight (archive.ReaderOptions.ReadAhead), not one GET at a time: the
// group alone has every transfer (before, a group was read through one
// buffer, one synchronous GET per 4 MiB, so that restores did not scale
// with --transfers). Each GET waits 50 ms at the fault proxy, so the
// GETs started together are seen together. The copy equals the source.
func TestS3_RestoreReadsAhead(t *testing.T) {
	bin, s3srv, bucket, p, src := s3Proxied(t)
	arCreate(t, src, "media", true, s3AttDocs("m", 20, 1<<20)...) // 20 MiB: 5 reads of 4 MiB
	env := append(s3srv.Env(), "SOFA_S3_ENDPOINT="+p.URL)
	key := "s3://" + bucket + "/ahead.sofa"
	// the database alone: no small group of a system database read
	// beside it
	s3Sofa(t, bin, env, "backup", src.URL, key, "-q", "--include", "media").want(t, exitOK)

	const transfers = 4
	if err := p.SetRules(faultproxy.Rule{Name: "get", Method: "GET", Delay: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	tgt := couchtest.Start(t)
	p.ResetStats()
	s3Sofa(t, bin, env, "restore", key, tgt.URL, "-q", "--transfers", strconv.Itoa(transfers)).want(t, exitOK)
	arEqual(t, src, "media", tgt, "media")
	peak := p.Stats().MaxInFlight
	t.Logf("restore of one 20 MiB group, --transfers %d: %d GETs, at most %d requests at once", transfers, p.Rule("get").Matched, peak)
	if peak < 2 || peak > transfers {
		t.Errorf("at most %d requests in flight at once, want 2 to %d (--transfers)", peak, transfers)
	}
}
