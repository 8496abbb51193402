package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sofadb/sofa/internal/flock"
)

// Multipart uploads left behind. A writer killed during an upload
// (SIGKILL, the OOM killer, a lost node) cannot abort it: the upload
// stays in the bucket, invisible but stored and billed. Create sweeps
// those of its own key, as the local store sweeps its temporary files,
// but never one a running writer still uses:
//
//   - This host keeps a registry of its writers' uploads: one file per
//     upload in os.TempDir()/sofa-s3-uploads, flocked while its writer
//     lives. An upload whose file's lock can be taken was left by a
//     writer of this host that died: it is aborted at once.
//   - Every writer marks its upload as sofa's with a small part number
//     markerPart (never a data part, never completed: CompleteMultipartUpload
//     lists the data parts only, so S3 drops it), uploaded again every
//     Options.Heartbeat. An upload whose marker is older than staleBeats
//     heartbeats, by the server's clock, was left by a writer that died
//     elsewhere (another pod, another machine).
//   - An upload without the marker (another tool's, a sofa before it)
//     is aborted once it was initiated Options.StaleAge ago (24 h).

const (
	// markerPart is the part number of the marker: the last S3 allows, so
	// data parts are 1 to MaxParts-1.
	markerPart = MaxParts
	// DefaultHeartbeat is how often a writer uploads its marker again.
	DefaultHeartbeat = time.Minute
	// staleBeats: a marker this many heartbeats old has lost its writer.
	staleBeats = 5
	// DefaultStaleAge is the age past which an upload of the key that sofa
	// did not mark is taken as abandoned.
	DefaultStaleAge = 24 * time.Hour
)

// marker is the marker part's content at t (always markerSize bytes).
func marker(t time.Time) []byte {
	return fmt.Appendf(nil, "sofa multipart upload marker %s\n", t.UTC().Format("2006-01-02T15:04:05Z"))
}

var markerSize = int64(len(marker(time.Time{})))

// putMarker uploads the marker part of the writer's upload.
func (w *writer) putMarker(ctx context.Context) error {
	b := marker(time.Now())
	sum := md5.Sum(b)
	_, err := w.s.c.UploadPart(ctx, &awss3.UploadPartInput{
		Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID,
		PartNumber: aws.Int32(markerPart), Body: bytes.NewReader(b),
		ContentLength: aws.Int64(int64(len(b))),
		ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	})
	return err
}

// startHeartbeat marks the upload as sofa's and keeps the mark fresh
// until stopHeartbeat. The marks are best effort: an upload the server
// would not mark is still written, only not known as sofa's.
func (w *writer) startHeartbeat() {
	w.hbStop, w.hbDone = make(chan struct{}), make(chan struct{})
	every := w.s.o.Heartbeat
	go func() {
		defer close(w.hbDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			_ = w.putMarker(w.ctx)
			select {
			case <-t.C:
			case <-w.hbStop:
				return
			case <-w.ctx.Done():
				return
			}
		}
	}()
}

// stopHeartbeat stops the marks and waits for one being sent.
func (w *writer) stopHeartbeat() {
	if w.hbStop == nil {
		return
	}
	select {
	case <-w.hbStop:
	default:
		close(w.hbStop)
	}
	<-w.hbDone
}

// registryDir holds this host's registry of uploads in progress.
func registryDir() string { return filepath.Join(os.TempDir(), "sofa-s3-uploads") }

// registryPrefix names the registry files of bucket/key; registryName
// the one of upload id.
func registryPrefix(bucket, key string) string {
	h := sha256.Sum256([]byte(bucket + "/" + key))
	return hex.EncodeToString(h[:12]) + "-"
}

func registryName(bucket, key, id string) string {
	h := sha256.Sum256([]byte(id))
	return filepath.Join(registryDir(), registryPrefix(bucket, key)+hex.EncodeToString(h[:12]))
}

// register records the writer's upload in this host's registry, locked
// until unregister (or the process's death). Best effort: without it an
// upload left by a killed writer is found by its marker's age alone.
func (w *writer) register() {
	if !flock.Supported {
		return
	}
	// Mkdir, not MkdirAll: a TMPDIR that does not exist is not created
	// (it created /nonexistent/sofa-s3-uploads as root)
	if err := os.Mkdir(registryDir(), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return
	}
	name := registryName(w.bucket, w.key, w.uploadID)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return
	}
	if flock.TryLock(f) != nil {
		f.Close()
		return
	}
	fmt.Fprintf(f, "s3://%s/%s\nupload %s\npid %d\n", w.bucket, w.key, w.uploadID, os.Getpid())
	w.reg = f
}

// unregister drops the writer's registry file: its upload is completed
// or aborted.
func (w *writer) unregister() {
	if w.reg != nil {
		os.Remove(w.reg.Name())
	}
	w.releaseRegistry()
}

// releaseRegistry unlocks the writer's registry file and leaves it: the
// upload is the writer's no more, and the next sweep of the key on this
// host aborts it.
func (w *writer) releaseRegistry() {
	if w.reg != nil {
		w.reg.Close()
		w.reg = nil
	}
}

// sweep aborts the uploads of bucket/key in progress that their writers
// left (see the top of this file), telling onStale of each. It is best
// effort: a listing refused (no s3:ListBucketMultipartUploads) or an
// abort refused leaves the uploads as they are.
func (s *Store) sweep(ctx context.Context, bucket, key string, onStale func(string)) {
	in := &awss3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &key}
	live := map[string]bool{} // registry files of uploads listed
	for {
		out, err := s.c.ListMultipartUploads(ctx, in)
		if err != nil {
			return
		}
		for _, u := range out.Uploads {
			if aws.ToString(u.Key) != key {
				continue
			}
			id := aws.ToString(u.UploadId)
			live[registryName(bucket, key, id)] = true
			why, stale := s.abandoned(ctx, bucket, key, u)
			if !stale {
				continue
			}
			_, err := s.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: &id})
			if err != nil && errCode(err) != "NoSuchUpload" {
				continue
			}
			os.Remove(registryName(bucket, key, id))
			if onStale != nil {
				onStale(fmt.Sprintf("%s%s/%s's multipart upload %s, %s", Scheme, bucket, key, id, why))
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	removeDeadRegistrations(bucket, key, live)
}

// abandoned tells whether upload u was left by its writer, and why.
func (s *Store) abandoned(ctx context.Context, bucket, key string, u types.MultipartUpload) (string, bool) {
	id := aws.ToString(u.UploadId)
	if f, err := os.Open(registryName(bucket, key, id)); err == nil {
		defer f.Close()
		switch err := flock.TryLock(f); {
		case err == nil:
			return "its writer on this host died", true
		case errors.Is(err, flock.ErrBusy):
			return "", false // a running writer of this host
		}
	}
	lp, err := s.c.ListParts(ctx, &awss3.ListPartsInput{Bucket: &bucket, Key: &key, UploadId: &id,
		PartNumberMarker: aws.String(fmt.Sprint(markerPart - 1)), MaxParts: aws.Int32(1)})
	if err != nil {
		return "", false
	}
	now := serverTime(lp.ResultMetadata)
	for _, p := range lp.Parts {
		if aws.ToInt32(p.PartNumber) == markerPart && aws.ToInt64(p.Size) == markerSize {
			age := now.Sub(aws.ToTime(p.LastModified))
			if age > staleBeats*s.o.Heartbeat {
				return fmt.Sprintf("sofa's, no heartbeat for %s", age.Round(time.Second)), true
			}
			return "", false
		}
	}
	if s.o.StaleAge < 0 {
		return "", false
	}
	age := now.Sub(aws.ToTime(u.Initiated))
	if age > s.o.StaleAge {
		return fmt.Sprintf("initiated %s ago, not marked as sofa's", age.Round(time.Minute)), true
	}
	return "", false
}

// serverTime is the Date of the answer (the server's clock, to compare
// with its timestamps), or the local time when it has none.
func serverTime(md middleware.Metadata) time.Time {
	if r, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok {
		if t, err := http.ParseTime(r.Header.Get("Date")); err == nil {
			return t
		}
	}
	return time.Now()
}

// removeDeadRegistrations removes the registry files of bucket/key whose
// upload is not in progress any more (completed or aborted by another
// run after its writer died), if no running writer holds them.
func removeDeadRegistrations(bucket, key string, listed map[string]bool) {
	if !flock.Supported {
		return
	}
	entries, err := os.ReadDir(registryDir())
	if err != nil {
		return
	}
	prefix := registryPrefix(bucket, key)
	for _, e := range entries {
		p := filepath.Join(registryDir(), e.Name())
		if !strings.HasPrefix(e.Name(), prefix) || listed[p] {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if flock.TryLock(f) == nil {
			os.Remove(p)
		}
		f.Close()
	}
}

// siblingSlack widens the window of a retried CreateMultipartUpload on
// both sides (the server's clock ticks in seconds).
const siblingSlack = 2 * time.Second

// dropSiblings aborts the uploads of bucket/key that a retried
// CreateMultipartUpload left (window: see writer.siblings; zero: none
// retried): initiated in the window, not ours (id), not marked as a
// running writer's. An attempt whose answer was lost (a reset, a stalled
// server that runs every attempt once it resumes) still created one, and
// nothing else would abort it before Options.StaleAge. Best effort.
func (s *Store) dropSiblings(ctx context.Context, bucket, key, id string, window [2]time.Time) {
	if window[0].IsZero() {
		return
	}
	in := &awss3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &key}
	for {
		out, err := s.c.ListMultipartUploads(ctx, in)
		if err != nil {
			return
		}
		for _, u := range out.Uploads {
			uid, at := aws.ToString(u.UploadId), aws.ToTime(u.Initiated)
			if aws.ToString(u.Key) != key || uid == id || at.Before(window[0]) || at.After(window[1]) || s.marked(ctx, bucket, key, uid) {
				continue
			}
			_, _ = s.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: &uid})
		}
		if !aws.ToBool(out.IsTruncated) {
			return
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// marked reports whether upload id of bucket/key carries sofa's marker
// part (a writer's, running or dead), or cannot be asked.
func (s *Store) marked(ctx context.Context, bucket, key, id string) bool {
	lp, err := s.c.ListParts(ctx, &awss3.ListPartsInput{Bucket: &bucket, Key: &key, UploadId: &id,
		PartNumberMarker: aws.String(fmt.Sprint(markerPart - 1)), MaxParts: aws.Int32(1)})
	if err != nil {
		return true
	}
	for _, p := range lp.Parts {
		if aws.ToInt32(p.PartNumber) == markerPart {
			return true
		}
	}
	return false
}
