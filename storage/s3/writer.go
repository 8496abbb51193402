package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sofadb/sofa/storage"
)

// Create starts writing the object name. Without o.Overwrite an existing
// object is refused (storage.ErrExist), at Create and again before the
// upload is completed. Create aborts the multipart uploads of name that
// earlier writers left (see stale.go), telling o.OnStale of each; no
// part is sent until the first one is full.
func (s *Store) Create(ctx context.Context, name string, o storage.CreateOptions) (storage.Writer, error) {
	bucket, key, err := Parse(name)
	if err != nil {
		return nil, err
	}
	if !o.Overwrite {
		if err := s.refuseExisting(ctx, bucket, key); err != nil {
			return nil, err
		}
	} else if _, err := s.c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &bucket}); err != nil {
		return nil, s.fail(ctx, "create", bucket, key, err)
	}
	s.sweep(ctx, bucket, key, o.OnStale)
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{
		s: s, ctx: ctx, cancel: cancel, bucket: bucket, key: key, overwrite: o.Overwrite,
		partSize: s.o.PartSize,
		free:     make(chan []byte, s.o.Transfers+1),
		slots:    make(chan struct{}, s.o.Transfers),
	}
	return w, nil
}

// refuseExisting returns storage.ErrExist when the object exists, and
// the error of a missing bucket or refused credentials.
func (s *Store) refuseExisting(ctx context.Context, bucket, key string) error {
	_, err := s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bucket, Key: &key})
	switch {
	case err == nil:
		return fmt.Errorf("%s%s/%s %w", Scheme, bucket, key, storage.ErrExist)
	case isNotFound(err):
		return s.checkBucket(ctx, "create", bucket, key)
	}
	return s.fail(ctx, "create", bucket, key, err)
}

// writer is a multipart upload in progress.
type writer struct {
	s              *Store
	ctx            context.Context
	cancel         context.CancelFunc
	bucket, key    string
	overwrite      bool
	partSize       int64
	buf            []byte // the part being filled
	n              int64  // bytes written
	uploadID       string
	next           int32 // number of the next part
	free           chan []byte
	slots          chan struct{}
	allocated      int   // part buffers made (at most Transfers+1 of a size)
	allocatedBytes int64 // their bytes
	wg             sync.WaitGroup

	mu    sync.Mutex
	parts []types.CompletedPart
	md5s  map[int32][]byte
	err   error

	done atomic.Bool
	// siblings is the server-clock window of a CreateMultipartUpload the
	// SDK sent more than once (zero: once): uploads of the key initiated
	// in it and not marked are the lost attempts' (dropSiblings).
	siblings [2]time.Time

	// the marker's heartbeat (stale.go) and this host's registry entry
	hbStop, hbDone chan struct{}
	reg            *os.File
}

// Stats count a writer's part buffers (tests check the memory bound).
type Stats struct {
	// Buffers is the number of part buffers made, BufferBytes their
	// bytes (the peak: buffers are reused, never freed early).
	Buffers     int
	BufferBytes int64
	// Parts is the number of parts sent; PartSize the size of the last.
	Parts    int
	PartSize int64
}

// WriterStats returns the Stats of a storage.Writer made by Create.
func WriterStats(w storage.Writer) Stats {
	x := w.(*writer)
	x.mu.Lock()
	defer x.mu.Unlock()
	return Stats{Buffers: x.allocated, BufferBytes: x.allocatedBytes, Parts: int(x.next), PartSize: x.partSize}
}

func (w *writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *writer) setErr(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.cancel()
}

// getBuf returns an empty buffer of the current part size: a new one
// while fewer than Transfers+1 exist, else one an upload gave back.
func (w *writer) getBuf() ([]byte, error) {
	for {
		w.mu.Lock()
		if w.allocated < cap(w.free) {
			w.allocated++
			w.allocatedBytes += w.partSize
			w.mu.Unlock()
			return getBuf(int(w.partSize))[:0], nil
		}
		w.mu.Unlock()
		select {
		case b := <-w.free:
			if int64(cap(b)) >= w.partSize {
				return b[:0], nil
			}
			// the part size grew: drop the small buffer, make a new one
			putBuf(b)
			w.mu.Lock()
			w.allocated--
			w.allocatedBytes -= int64(cap(b))
			w.mu.Unlock()
		case <-w.ctx.Done():
			if err := w.failed(); err != nil {
				return nil, err
			}
			return nil, w.ctx.Err()
		}
	}
}

func (w *writer) Write(p []byte) (int, error) {
	if w.done.Load() {
		return 0, errors.New("s3: write after Commit or Abort")
	}
	written := 0
	for len(p) > 0 {
		if err := w.failed(); err != nil {
			return written, err
		}
		if w.buf == nil {
			b, err := w.getBuf()
			if err != nil {
				return written, err
			}
			w.buf = b
		}
		k := min(len(p), int(w.partSize)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, written, w.n = p[k:], written+k, w.n+int64(k)
		if len(w.buf) == int(w.partSize) {
			if err := w.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flush sends the full buffer as the next part, once a transfer slot is
// free.
func (w *writer) flush() error {
	if w.uploadID == "" {
		if err := w.ctx.Err(); err != nil {
			w.setErr(err)
			return err
		}
		// Not cancelled with the run: an upload the store creates while
		// the run is interrupted would stay behind, its ID never known to
		// the abort that follows.
		t0 := time.Now()
		out, err := w.s.c.CreateMultipartUpload(context.WithoutCancel(w.ctx), &awss3.CreateMultipartUploadInput{Bucket: &w.bucket, Key: &w.key})
		if err != nil {
			err = w.s.fail(w.ctx, "upload", w.bucket, w.key, err)
			w.setErr(err)
			return err
		}
		w.uploadID = aws.ToString(out.UploadId)
		if ar, ok := retry.GetAttemptResults(out.ResultMetadata); ok && len(ar.Results) > 1 {
			// Sent more than once: the server may have run the attempts
			// whose answers were lost too (siblings, swept at the end).
			end := serverTime(out.ResultMetadata)
			w.siblings = [2]time.Time{end.Add(-time.Since(t0) - siblingSlack), end.Add(siblingSlack)}
		}
		w.register()
		w.startHeartbeat()
	}
	if w.next >= MaxParts-1 { // the last part number is the marker's
		err := fmt.Errorf("upload archive %s%s/%s: more than %d parts", Scheme, w.bucket, w.key, MaxParts-1)
		w.setErr(err)
		return err
	}
	select {
	case w.slots <- struct{}{}:
	case <-w.ctx.Done():
		if err := w.failed(); err != nil {
			return err
		}
		return w.ctx.Err()
	}
	w.mu.Lock()
	w.next++
	num := w.next
	if num%partsPerSize == 0 {
		w.partSize *= 2 // next parts are larger: 9,999 parts fit any archive
	}
	w.mu.Unlock()
	buf := w.buf
	w.buf = nil
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.slots }()
		sum := md5.Sum(buf)
		out, err := w.s.c.UploadPart(w.ctx, &awss3.UploadPartInput{
			Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf),
			ContentLength: aws.Int64(int64(len(buf))),
			ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(sum[:])),
		})
		w.free <- buf
		if err != nil {
			w.setErr(w.s.fail(w.ctx, fmt.Sprintf("upload part %d of", num), w.bucket, w.key, err))
			return
		}
		// the server checked the part against its Content-MD5; its ETag is
		// the MD5 only without KMS or customer-key encryption, so it is
		// not compared here
		w.mu.Lock()
		if w.md5s == nil {
			w.md5s = map[int32][]byte{}
		}
		w.md5s[num] = sum[:]
		w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		w.mu.Unlock()
	}()
	return nil
}

// Commit sends the last part, completes the upload (or puts a short
// stream whole) and checks the object's size and ETag.
func (w *writer) Commit() error {
	if w.done.Swap(true) {
		return errors.New("s3: Commit after Commit or Abort")
	}
	err := w.commit()
	if err != nil {
		w.abort()
	}
	w.cancel()
	w.release()
	return err
}

// release gives the part buffers back once no upload uses them.
func (w *writer) release() {
	w.wg.Wait()
	if w.buf != nil {
		putBuf(w.buf)
		w.buf = nil
	}
	for {
		select {
		case b := <-w.free:
			putBuf(b)
		default:
			return
		}
	}
}

func (w *writer) commit() error {
	if err := w.failed(); err != nil {
		return err
	}
	if w.uploadID == "" {
		return w.putWhole()
	}
	if len(w.buf) > 0 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.wg.Wait()
	w.stopHeartbeat()
	if err := w.failed(); err != nil {
		return err
	}
	if !w.overwrite {
		if err := w.s.refuseExisting(w.ctx, w.bucket, w.key); err != nil {
			return err
		}
	}
	parts := w.parts
	sortParts(parts)
	h := md5.New()
	for _, p := range parts {
		h.Write(w.md5s[aws.ToInt32(p.PartNumber)])
	}
	want := fmt.Sprintf("%s-%d", hex.EncodeToString(h.Sum(nil)), len(parts))
	_, err := w.s.c.CompleteMultipartUpload(w.ctx, &awss3.CompleteMultipartUploadInput{
		Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return w.s.fail(w.ctx, "complete upload of", w.bucket, w.key, err)
	}
	done := w.uploadID
	w.uploadID = "" // completed: nothing to abort any more
	w.unregister()
	w.s.dropSiblings(w.ctx, w.bucket, w.key, done, w.siblings)
	return w.check(want)
}

// putWhole sends a stream shorter than one part with one PutObject.
func (w *writer) putWhole() error {
	sum := md5.Sum(w.buf)
	_, err := w.s.c.PutObject(w.ctx, &awss3.PutObjectInput{
		Bucket: &w.bucket, Key: &w.key, Body: bytes.NewReader(w.buf),
		ContentLength: aws.Int64(int64(len(w.buf))),
		ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	})
	if err != nil {
		return w.s.fail(w.ctx, "upload", w.bucket, w.key, err)
	}
	return w.check(hex.EncodeToString(sum[:]))
}

// check compares the stored object with what was sent: its size, and
// its ETag with the one S3 computes from the parts' MD5s (objects whose
// ETags are not MD5-based, under SSE-KMS or SSE-C or on servers that
// make them otherwise, get the size check only). A mismatch removes
// the object: a damaged archive is never left under the name.
func (w *writer) check(wantETag string) error {
	h, err := w.s.c.HeadObject(w.ctx, &awss3.HeadObjectInput{Bucket: &w.bucket, Key: &w.key})
	if err != nil {
		return w.s.fail(w.ctx, "check uploaded", w.bucket, w.key, err)
	}
	loc := Scheme + w.bucket + "/" + w.key
	var bad error
	etag := strings.Trim(aws.ToString(h.ETag), `"`)
	switch {
	case aws.ToInt64(h.ContentLength) != w.n:
		bad = fmt.Errorf("check uploaded archive %s: it holds %d bytes, %d were sent", loc, aws.ToInt64(h.ContentLength), w.n)
	case md5Like(etag) && plainETag(h) && !strings.EqualFold(etag, wantETag):
		bad = fmt.Errorf("check uploaded archive %s: ETag %s, the parts sent make %s", loc, etag, wantETag)
	}
	if bad != nil {
		_, _ = w.s.c.DeleteObject(context.WithoutCancel(w.ctx), &awss3.DeleteObjectInput{Bucket: &w.bucket, Key: &w.key})
		return bad
	}
	return nil
}

// plainETag: the object's ETag is MD5-based (S3 computes it otherwise
// under SSE-KMS and SSE-C).
func plainETag(h *awss3.HeadObjectOutput) bool {
	return h.SSECustomerAlgorithm == nil && !strings.HasPrefix(string(h.ServerSideEncryption), "aws:kms")
}

// md5Like: an ETag of the form S3 gives (hex MD5, "-N" for multipart).
func md5Like(etag string) bool {
	h, _, _ := strings.Cut(etag, "-")
	if len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func sortParts(p []types.CompletedPart) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && aws.ToInt32(p[j].PartNumber) < aws.ToInt32(p[j-1].PartNumber); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// Abort stops the uploads in flight and aborts the multipart upload:
// nothing is left under the key (an older object stays as it was).
func (w *writer) Abort() error {
	if w.done.Swap(true) {
		return nil
	}
	err := w.abort()
	w.release()
	return err
}
