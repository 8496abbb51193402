package s3_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa/internal/s3test"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
)

// uploadIDs lists the multipart uploads of key in progress.
func uploadIDs(t *testing.T, endpoint, bucket, key string) []string {
	t.Helper()
	out, err := s3test.Client(endpoint).ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &key})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range out.Uploads {
		if aws.ToString(u.Key) == key {
			ids = append(ids, aws.ToString(u.UploadId))
		}
	}
	return ids
}

// rawUpload starts a multipart upload of key with one part, as another
// process would; with marked, it carries sofa's marker part too.
func rawUpload(t *testing.T, endpoint, bucket, key string, marked bool) string {
	t.Helper()
	c := s3test.Client(endpoint)
	ctx := context.Background()
	out, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	put := func(n int32, b []byte) {
		if _, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: out.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b)))}); err != nil {
			t.Fatal(err)
		}
	}
	put(1, pattern(s3.MinPartSize))
	if marked {
		put(s3.MarkerPart, s3.Marker())
	}
	return aws.ToString(out.UploadId)
}

// TestCreate_SweepsAbandonedUploads: Create aborts the uploads of its key
// that their writers left (a writer of this host that died: at once; a
// marker without heartbeat for 5 heartbeats; an unmarked upload past
// StaleAge) and tells OnStale; it leaves the upload of a running writer
// (which then completes), young unmarked uploads, and other keys'.
func TestCreate_SweepsAbandonedUploads(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t)
	ctx := context.Background()
	name := func(key string) string { return "s3://" + bucket + "/" + key }
	const beat = 200 * time.Millisecond
	st := newStore(t, srv.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 2, Heartbeat: beat, StaleAge: -1})

	// A writer of this host that died mid-upload, and a running one of
	// the same key: the dead one's upload goes at the next Create, the
	// running one's stays and completes.
	data := pattern(3*s3.MinPartSize + 99)
	dead, err := st.Create(ctx, name("k"), storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, dead, data[:2*s3.MinPartSize+1])
	deadID := s3.UploadID(dead)
	s3.Die(dead)
	if ids := uploadIDs(t, srv.URL, bucket, "k"); !slices.Equal(ids, []string{deadID}) {
		t.Fatalf("uploads %v, want the dead writer's %s", ids, deadID)
	}
	var told []string
	live, err := st.Create(ctx, name("k"), storage.CreateOptions{OnStale: func(s string) { told = append(told, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if ids := uploadIDs(t, srv.URL, bucket, "k"); len(ids) != 0 {
		t.Errorf("after the sweep: uploads %v, want none", ids)
	}
	if len(told) != 1 || !strings.Contains(told[0], deadID) || !strings.Contains(told[0], "died") {
		t.Errorf("OnStale heard %q", told)
	}
	writeStream(t, live, data[:2*s3.MinPartSize+1])
	liveID := s3.UploadID(live)
	told = nil
	third, err := st.Create(ctx, name("k"), storage.CreateOptions{Overwrite: true, OnStale: func(s string) { told = append(told, s) }})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5*beat + 2*time.Second) // past the marker's age: the registry tells
	third.Abort()
	third, err = st.Create(ctx, name("k"), storage.CreateOptions{Overwrite: true, OnStale: func(s string) { told = append(told, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if ids := uploadIDs(t, srv.URL, bucket, "k"); !slices.Equal(ids, []string{liveID}) || len(told) != 0 {
		t.Errorf("with a running writer: uploads %v (want its %s alone), OnStale heard %q", ids, liveID, told)
	}
	third.Abort()
	// The same running writer as if on another host: its heartbeat
	// keeps its upload.
	s3.Elsewhere(live)
	time.Sleep(5*beat + 2*time.Second)
	third, err = st.Create(ctx, name("k"), storage.CreateOptions{Overwrite: true, OnStale: func(s string) { told = append(told, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if ids := uploadIDs(t, srv.URL, bucket, "k"); !slices.Equal(ids, []string{liveID}) || len(told) != 0 {
		t.Errorf("with a running writer elsewhere: uploads %v (want its %s alone), OnStale heard %q", ids, liveID, told)
	}
	writeStream(t, live, data[2*s3.MinPartSize+1:])
	if err := live.Commit(); err != nil {
		t.Fatalf("the running writer's upload, left alone: %v", err)
	}
	third.Abort()

	// Another process's uploads: sofa's marker not refreshed for 5
	// heartbeats goes; an unmarked young one stays (StaleAge), another
	// key's stays.
	marked := rawUpload(t, srv.URL, bucket, "m", true)
	unmarked := rawUpload(t, srv.URL, bucket, "m", false)
	other := rawUpload(t, srv.URL, bucket, "m2", true)
	fresh, err := st.Create(ctx, name("m"), storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh.Abort()
	if ids := uploadIDs(t, srv.URL, bucket, "m"); !slices.Contains(ids, marked) {
		t.Errorf("a marker seconds old was taken as abandoned: uploads %v", ids)
	}
	time.Sleep(5*beat + 2*time.Second) // the server's clocks count seconds
	told = nil
	w, err := st.Create(ctx, name("m"), storage.CreateOptions{OnStale: func(s string) { told = append(told, s) }})
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if ids := uploadIDs(t, srv.URL, bucket, "m"); !slices.Equal(ids, []string{unmarked}) {
		t.Errorf("uploads %v, want the unmarked %s alone (the marked %s swept)", ids, unmarked, marked)
	}
	if len(told) != 1 || !strings.Contains(told[0], marked) || !strings.Contains(told[0], "heartbeat") {
		t.Errorf("OnStale heard %q", told)
	}
	if ids := uploadIDs(t, srv.URL, bucket, "m2"); !slices.Equal(ids, []string{other}) {
		t.Errorf("another key's upload was touched: %v", ids)
	}

	// Past StaleAge an unmarked upload goes too.
	aged := newStore(t, srv.URL, s3.Options{PartSize: s3.MinPartSize, StaleAge: time.Second})
	w, err = aged.Create(ctx, name("m"), storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if ids := uploadIDs(t, srv.URL, bucket, "m"); len(ids) != 0 {
		t.Errorf("an unmarked upload past StaleAge stayed: %v", ids)
	}
}
