package s3

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// abortGrace is how long an abort lets the parts in flight finish before
// it cancels them. A part cancelled by the client may still be stored by
// the server after the abort and bring the upload back (per the S3 API,
// AbortMultipartUpload: "part uploads in progress might or might not
// succeed"), so they are let finish, and the abort is confirmed.
const abortGrace = 10 * time.Second

// abortTries is how many times an abort is sent while the upload is
// still listed after it.
const abortTries = 4

func (w *writer) abort() error {
	w.mu.Lock()
	if w.err == nil {
		w.err = errors.New("s3: upload aborted") // no new parts
	}
	w.mu.Unlock()
	w.stopHeartbeat()
	if !waitFor(&w.wg, abortGrace) {
		w.cancel() // parts stuck past the grace are given up
	}
	w.wg.Wait()
	w.cancel()
	if w.uploadID == "" {
		w.unregister()
		return nil
	}
	ctx := context.WithoutCancel(w.ctx)
	for try := 0; ; try++ {
		_, err := w.s.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID})
		if err != nil && errCode(err) != "NoSuchUpload" {
			// the upload stays, and its registry entry unlocked: the next
			// Create of the key on this host aborts it
			w.releaseRegistry()
			return w.s.fail(ctx, "abort upload of", w.bucket, w.key, err)
		}
		if try+1 == abortTries || !w.uploadListed(ctx) {
			break
		}
		time.Sleep(time.Duration(50<<try) * time.Millisecond)
	}
	w.s.dropSiblings(ctx, w.bucket, w.key, w.uploadID, w.siblings)
	w.uploadID = ""
	w.unregister()
	return nil
}

// uploadListed tells whether the server still knows the upload after an
// abort (a part stored late recreates it on some servers). An answer
// other than NoSuchUpload counts as gone: the abort was acknowledged, and
// a left upload is found by the next Create of the key (stale.go).
func (w *writer) uploadListed(ctx context.Context) bool {
	_, err := w.s.c.ListParts(ctx, &awss3.ListPartsInput{Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID, MaxParts: aws.Int32(1)})
	return err == nil
}

// waitFor waits for wg at most d; it tells whether wg was done.
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
