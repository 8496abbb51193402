package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/s3test"
	"github.com/sofadb/sofa/replicate"
)

// s3UploadIDs lists the multipart uploads in progress in bucket.
func s3UploadIDs(t *testing.T, endpoint, bucket string) []string {
	t.Helper()
	out, err := s3test.Client(endpoint).ListMultipartUploads(t.Context(), &awss3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range out.Uploads {
		ids = append(ids, aws.ToString(u.UploadId))
	}
	return ids
}

// TestS3_KilledBackupUploadSwept: a backup killed with SIGKILL while a
// part is on its way leaves its multipart upload (nothing can abort it);
// a concurrent backup of the same key leaves it alone while its writer
// lives; the next backup of the key, once that writer is dead, aborts it
// (saying so with -v), completes, and no upload is left in the bucket.
func TestS3_KilledBackupUploadSwept(t *testing.T) {
	bin, s3srv, bucket, p, src := s3Proxied(t)
	arCreate(t, src, "media", true, s3AttDocs("m", 12, 1<<20)...)
	if err := p.SetRules(faultproxy.Rule{Name: "hang", Method: "PUT", Delay: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	env := append(append(os.Environ(), s3srv.Env()...), "SOFA_S3_ENDPOINT="+p.URL)
	key := "s3://" + bucket + "/nightly.sofa"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"backup", src.URL, key, "--part-size", "5242880"}, args...)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stderr
	}
	waitUploads := func(n int, stderr *bytes.Buffer) []string {
		for {
			if ids := s3UploadIDs(t, s3srv.URL, bucket); len(ids) >= n {
				return ids
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no multipart upload in progress\n%s", stderr)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	a, aErr := start("-q")
	ids := waitUploads(1, aErr)
	killed := ids[0]

	// A second backup of the key while the first lives: its upload stays.
	b, bErr := start("-q", "--force")
	ids = waitUploads(2, bErr)
	if !slices.Contains(ids, killed) {
		t.Fatalf("a running backup's upload was aborted by another one: %v", ids)
	}
	b.Process.Signal(syscall.SIGINT)
	b.Wait()
	if code := b.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("second backup: exit %d\n%s", code, bErr)
	}

	// SIGKILL: the upload stays behind.
	a.Process.Kill()
	a.Wait()
	if ids := s3UploadIDs(t, s3srv.URL, bucket); !slices.Equal(ids, []string{killed}) {
		t.Fatalf("after SIGKILL: uploads %v, want the killed backup's %s", ids, killed)
	}

	// The next backup of the key sweeps it.
	p.SetRules()
	r := s3Sofa(t, bin, append(s3srv.Env(), "SOFA_S3_ENDPOINT="+p.URL), "backup", src.URL, key, "--part-size", "5242880", "-v")
	r.want(t, exitOK)
	if !strings.Contains(r.stderr, "removed") || !strings.Contains(r.stderr, killed) {
		t.Errorf("the backup does not say it removed the killed one's upload %s:\n%s", killed, r.stderr)
	}
	if ids := s3UploadIDs(t, s3srv.URL, bucket); len(ids) != 0 {
		t.Errorf("multipart uploads left: %v", ids)
	}
	s3Sofa(t, bin, s3srv.Env(), "verify", key, src.URL, "-q").want(t, exitOK)
}

// TestS3_BackupMemoryBound: a backup to s3:// holds part size x
// (transfers + 1) beyond the memory the process allows itself, whatever
// the archive's size: sofa sets Go's soft memory limit from its flags
// (--max-inflight-bytes + --workers x 3 x --write-batch-bytes (at least
// 4 MiB) + --max-dbs MiB + 32 MiB: engineFlags.setMemoryLimit), and the
// parts live outside the Go heap. An archive of 200 MiB of incompressible
// attachments, larger than the bound, through 5 MiB parts and 4
// transfers, peaks within limit + parts + 16 MiB (the runtime's own).
func TestS3_BackupMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("backs up 200 MiB")
	}
	bin := sofaBin(t)
	s3srv := s3test.Start(t)
	bucket := s3srv.Bucket(t)
	src := couchtest.Start(t)
	for _, db := range []string{"media-a", "media-b"} {
		if err := src.Client().CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i += 5 {
			arWrite(t, src, db, true, s3AttDocs(fmt.Sprintf("m%02d-", i), 5, 2<<20)...)
		}
	}
	for _, kv := range s3srv.Env() {
		k, v, _ := cut(kv)
		t.Setenv(k, v)
	}
	const part, transfers, budget, workers = 5 << 20, 4, 8 << 20, 2
	key := fmt.Sprintf("s3://%s/big.sofa", bucket)
	peak := arPeakRSS(t, bin, "backup", src.URL, key, "-q", "--part-size", fmt.Sprint(part), "--transfers", fmt.Sprint(transfers),
		"--max-inflight-bytes", fmt.Sprint(budget), "--workers", fmt.Sprint(workers))
	limit := int64(budget + workers*3*replicate.DefaultWriteBatchBytes + sofa.DefaultMaxDBs<<20 + 32<<20)
	bound := limit + part*(transfers+1) + 16<<20
	info, err := s3test.Client(s3srv.URL).HeadObject(t.Context(), &awss3.HeadObjectInput{Bucket: &bucket, Key: aws.String("big.sofa")})
	if err != nil {
		t.Fatal(err)
	}
	size := aws.ToInt64(info.ContentLength)
	t.Logf("archive %d MiB; peak RSS %d MiB; bound %d MiB (memory limit %d + parts %d + 16)", size>>20, peak>>20, bound>>20, limit>>20, part*(transfers+1)>>20)
	if peak > bound {
		t.Errorf("backup to s3 peaked at %d MiB, over the bound %d MiB", peak>>20, bound>>20)
	}
	if size <= bound {
		t.Fatalf("archive of %d MiB: not larger than the bound, so the test tells nothing", size>>20)
	}
	s3Sofa(t, bin, nil, "verify", key, src.URL, "-q").want(t, exitOK)
}
