package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/s3test"
)

// s3:// archives end to end (issue 13): backup, --since, restore of a
// chain, verify alone and against a server, ls, on versitygw, through
// the fault proxy; bad input answered with one line and its exit code.

// s3Sofa runs the binary with env added to the test's environment.
// s3Proxied starts what most s3 tests need: the sofa binary, versitygw
// with a bucket, a fault proxy in front of it (keeping the Host header
// the requests were signed for) and a CouchDB source.
func s3Proxied(t *testing.T) (bin string, s3srv *s3test.Server, bucket string, p *faultproxy.Proxy, src *couchtest.Server) {
	t.Helper()
	bin = sofaBin(t)
	s3srv = s3test.Start(t)
	bucket = s3srv.Bucket(t)
	p = faultproxy.StartT(t, s3srv.URL)
	p.KeepHost()
	return bin, s3srv, bucket, p, couchtest.Start(t)
}

func s3Sofa(t *testing.T, bin string, env []string, args ...string) arRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("sofa %s: %v", strings.Join(args, " "), err)
	}
	return arRun{args: args, code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// s3AttDocs are n documents with a random (incompressible) attachment
// of size bytes each: archives of several parts.
func s3AttDocs(prefix string, n, size int) []json.RawMessage {
	docs := make([]json.RawMessage, n)
	for i := range docs {
		docs[i] = arRaw(`{"_id":"%s%03d","i":%d,"_attachments":{"blob.bin":{"content_type":"application/octet-stream","data":"%s"}}}`,
			prefix, i, i, base64.StdEncoding.EncodeToString(arRandom(size)))
	}
	return docs
}

// s3Objects lists the keys of bucket.
func s3Objects(t *testing.T, endpoint, bucket string) []string {
	t.Helper()
	out, err := s3test.Client(endpoint).ListObjectsV2(t.Context(), &awss3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// TestS3_BackupRestoreChainThroughFaults: a full and an incremental
// backup to versitygw through the fault proxy (500s, 503 SlowDown,
// resets after a part was sent and while it is sent, slow parts, reads
// cut mid-body) complete, and print nothing but their summaries;
// verify checks each alone and the full one against the source; ls lists
// them; the chain restored from the bucket equals the source (compared
// by couchtest.CompareDBs, independent of sofa). No multipart upload is
// left behind.
func TestS3_BackupRestoreChainThroughFaults(t *testing.T) {
	bin, s3srv, bucket, p, src := s3Proxied(t)
	arCreate(t, src, "media", true, s3AttDocs("m", 14, 1<<20)...)
	arCreate(t, src, "notes", true, arSmallDocs("n", 300)...)

	env := append(s3srv.Env(), "SOFA_S3_ENDPOINT="+p.URL) // through the proxy
	flags := []string{"--part-size", "5242880", "--transfers", "3"}
	rules := []faultproxy.Rule{
		{Name: "500", Method: "PUT", After: 1, Times: 2, Fault: faultproxy.Status, Status: 500},
		{Name: "slowdown", Method: "PUT", After: 1, Times: 2, Fault: faultproxy.Status, Status: 503,
			Body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`},
		{Name: "reset", Method: "PUT", After: 2, Times: 2, Fault: faultproxy.ResetAfterForward},
		{Name: "reset-mid-part", Method: "PUT", After: 3, Times: 2, Fault: faultproxy.ResetMidRequest, CutBytes: 1 << 20},
		{Name: "slow", Method: "PUT", After: 2, Times: 2, Delay: 500 * time.Millisecond},
		{Name: "cut-get", Method: "GET", After: 1, Times: 3, Fault: faultproxy.ResetMidBody, CutBytes: 512 << 10},
	}
	if err := p.SetRules(rules...); err != nil {
		t.Fatal(err)
	}
	full, inc := "s3://"+bucket+"/nightly/full.sofa", "s3://"+bucket+"/nightly/inc.sofa"
	quiet := func(args ...string) {
		t.Helper()
		r := s3Sofa(t, bin, env, append(args, flags...)...)
		r.want(t, exitOK)
		if strings.TrimSpace(r.stderr) != "" {
			t.Errorf("sofa %s -q printed:\n%s", args[0], r.stderr)
		}
	}
	// -v logs the S3 requests retried (the PUTs answered 500 and 503),
	// never the secret key
	r := s3Sofa(t, bin, env, append([]string{"backup", src.URL, full, "-v"}, flags...)...)
	r.want(t, exitOK)
	if !strings.Contains(r.stderr, "sofa: s3: retry ") || strings.Contains(r.stderr, s3test.SecretKey) {
		t.Errorf("sofa backup -v: want the S3 retries logged, without the secret key:\n%s", r.stderr)
	}
	quiet("verify", full, src.URL, "-q")

	arWrite(t, src, "notes", true, arSmallDocs("later", 50)...)
	arCreate(t, src, "fresh", true, s3AttDocs("f", 3, 100<<10)...)
	quiet("backup", src.URL, inc, "--since", full, "-q")
	for _, a := range []string{full, inc} {
		quiet("verify", a, "-q")
	}
	r = s3Sofa(t, bin, env, "ls", "--json", inc)
	r.want(t, exitOK)
	var l lsJSON
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if d := l.db(t, "notes"); d.Revisions != 50 || len(d.Since) == 0 {
		t.Errorf("incremental: notes has %d revisions since %s, want 50 since the full backup", d.Revisions, d.Since)
	}

	tgt := couchtest.Start(t)
	r = s3Sofa(t, bin, env, append([]string{"restore", full, inc, tgt.URL, "--json"}, flags...)...)
	r.want(t, exitOK)
	for _, db := range []string{"media", "notes", "fresh"} {
		arEqual(t, src, db, tgt, db)
	}
	for _, rule := range rules {
		if s := p.Rule(rule.Name); s.Fired == 0 {
			t.Errorf("fault %s never fired (%+v)", rule.Name, s)
		}
	}
	if u := s3test.Uploads(t, s3srv.URL, bucket); len(u) != 0 {
		t.Errorf("multipart uploads left: %v", u)
	}
}

// TestS3_PersistentFailureAborts: a bucket that refuses every part ends
// the backup with one line and exit 1; its multipart upload is aborted:
// no object under the key, none in progress.
func TestS3_PersistentFailureAborts(t *testing.T) {
	bin, s3srv, bucket, p, src := s3Proxied(t)
	arCreate(t, src, "media", true, s3AttDocs("m", 12, 1<<20)...)
	if err := p.SetRules(faultproxy.Rule{Name: "down", Method: "PUT", Fault: faultproxy.Status, Status: 500}); err != nil {
		t.Fatal(err)
	}
	env := append(s3srv.Env(), "SOFA_S3_ENDPOINT="+p.URL)
	r := s3Sofa(t, bin, env, "backup", src.URL, "s3://"+bucket+"/never.sofa", "--part-size", "5242880", "-q")
	r.want(t, exitFatal)
	line := r.errLine(t)
	if !strings.Contains(line, "s3://"+bucket+"/never.sofa") || !strings.Contains(line, "500") && !strings.Contains(line, "Internal") {
		t.Errorf("error line %q does not say what failed", line)
	}
	if p.Rule("down").Fired < 2 {
		t.Errorf("the part was not retried: %+v", p.Rule("down"))
	}
	if k := s3Objects(t, s3srv.URL, bucket); len(k) != 0 {
		t.Errorf("objects left: %v", k)
	}
	if u := s3test.Uploads(t, s3srv.URL, bucket); len(u) != 0 {
		t.Errorf("multipart uploads left: %v", u)
	}
}

// TestS3_BadInput: a missing bucket, wrong credentials, a missing
// object, an object that is not an archive, a truncated archive and a
// location without a key: one clear line each (never the secret), with
// the exit code of the table.
func TestS3_BadInput(t *testing.T) {
	bin := sofaBin(t)
	s3srv := s3test.Start(t)
	bucket := s3srv.Bucket(t)
	src := couchtest.Start(t)
	arCreate(t, src, "db", true, arSmallDocs("d", 200)...)
	env := s3srv.Env()
	good := "s3://" + bucket + "/good.sofa"
	s3Sofa(t, bin, env, "backup", src.URL, good, "-q").want(t, exitOK)

	// the same archive cut in half, and an object that is no archive
	obj, err := s3test.Client(s3srv.URL).GetObject(t.Context(), &awss3.GetObjectInput{Bucket: &bucket, Key: aws.String("good.sofa")})
	if err != nil {
		t.Fatal(err)
	}
	var whole bytes.Buffer
	whole.ReadFrom(obj.Body)
	obj.Body.Close()
	put := func(key string, data []byte) {
		if _, err := s3test.Client(s3srv.URL).PutObject(t.Context(), &awss3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
	}
	put("half.sofa", whole.Bytes()[:whole.Len()/2])
	put("notes.txt", []byte("these are not the droids you are looking for\n"))
	// a local previous archive continues into the bucket
	local := filepath.Join(t.TempDir(), "x.sofa")
	s3Sofa(t, bin, env, "backup", src.URL, local, "-q").want(t, exitOK)
	arWrite(t, src, "db", true, arSmallDocs("e", 5)...)
	s3Sofa(t, bin, env, "backup", src.URL, "s3://"+bucket+"/from-local.sofa", "--since", local, "-q").want(t, exitOK)

	const wrongSecret = "wrong-secret-never-printed"
	noFile := filepath.Join(t.TempDir(), "none") // no shared config or credentials file
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"missing bucket backup", nil, []string{"backup", src.URL, "s3://no-such-bucket/x.sofa"}, exitFatal, "bucket no-such-bucket does not exist"},
		{"missing bucket ls", nil, []string{"ls", "s3://no-such-bucket/x.sofa"}, exitFatal, "bucket no-such-bucket does not exist"},
		{"missing bucket verify", nil, []string{"verify", "s3://no-such-bucket/x.sofa"}, exitFatal, "bucket no-such-bucket does not exist"},
		{"missing bucket restore", nil, []string{"restore", "s3://no-such-bucket/x.sofa", src.URL}, exitFatal, "bucket no-such-bucket does not exist"},
		{"missing bucket since", nil, []string{"backup", src.URL, "s3://" + bucket + "/z.sofa", "--since", "s3://no-such-bucket/x.sofa"}, exitFatal, "bucket no-such-bucket does not exist"},
		{"wrong credentials ls", []string{"AWS_SECRET_ACCESS_KEY=" + wrongSecret}, []string{"ls", good}, exitFatal, "access denied"},
		{"wrong credentials restore", []string{"AWS_SECRET_ACCESS_KEY=" + wrongSecret}, []string{"restore", good, src.URL}, exitFatal, "access denied"},
		{"unknown access key", []string{"AWS_ACCESS_KEY_ID=AKIANOSUCHKEY0000000"}, []string{"verify", good}, exitFatal, "access denied"},
		{"wrong credentials", []string{"AWS_SECRET_ACCESS_KEY=" + wrongSecret}, []string{"verify", good}, exitFatal, "access denied"},
		{"wrong credentials backup", []string{"AWS_SECRET_ACCESS_KEY=" + wrongSecret}, []string{"backup", src.URL, "s3://" + bucket + "/y.sofa"}, exitFatal, "access denied"},
		{"wrong credentials backup names its key", []string{"AWS_SECRET_ACCESS_KEY=" + wrongSecret}, []string{"backup", src.URL, "s3://" + bucket + "/y.sofa"}, exitFatal, "s3://" + bucket + "/y.sofa:"},
		{"no credentials", []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_EC2_METADATA_DISABLED=true", "AWS_SHARED_CREDENTIALS_FILE=" + noFile, "AWS_CONFIG_FILE=" + noFile}, []string{"ls", good}, exitFatal, "none were found"},
		{"wrong region", nil, []string{"ls", good, "--s3-region", "eu-west-3"}, exitFatal, "--s3-region"},
		{"missing object", nil, []string{"restore", "s3://" + bucket + "/none.sofa", src.URL}, exitFatal, "does not exist"},
		{"not an archive", nil, []string{"verify", "s3://" + bucket + "/notes.txt"}, exitFatal, "s3://" + bucket + "/notes.txt"},
		{"not an archive ls", nil, []string{"ls", "s3://" + bucket + "/notes.txt"}, exitFatal, "s3://" + bucket + "/notes.txt"},
		{"truncated", nil, []string{"verify", "s3://" + bucket + "/half.sofa"}, exitFatal, "s3://" + bucket + "/half.sofa"},
		{"truncated restore", nil, []string{"restore", "s3://" + bucket + "/half.sofa", src.URL}, exitFatal, "half.sofa"},
		{"truncated ls", nil, []string{"ls", "s3://" + bucket + "/half.sofa"}, exitFatal, "half.sofa"},
		{"truncated since", nil, []string{"backup", src.URL, "s3://" + bucket + "/z.sofa", "--since", "s3://" + bucket + "/half.sofa"}, exitFatal, "half.sofa"},
		{"not an archive since", nil, []string{"backup", src.URL, "s3://" + bucket + "/z.sofa", "--since", "s3://" + bucket + "/notes.txt"}, exitFatal, "notes.txt"},
		{"not an archive restore", nil, []string{"restore", "s3://" + bucket + "/notes.txt", src.URL}, exitFatal, "notes.txt"},
		{"no key", nil, []string{"verify", "s3://" + bucket}, exitUsage, "not an s3://BUCKET/KEY location"},
		{"endpoint not a URL", nil, []string{"ls", good, "--s3-endpoint", "not a url"}, exitUsage, "is not an http(s)://HOST[:PORT] URL"},
		{"endpoint without its scheme", nil, []string{"ls", good, "--s3-endpoint", "127.0.0.1:9000"}, exitUsage, "is not an http(s)://HOST[:PORT] URL"},
		{"endpoint with credentials", nil, []string{"ls", good, "--s3-endpoint", "http://key:" + wrongSecret + "@127.0.0.1:9000"}, exitUsage, "carries credentials"},
		{"unparsable endpoint with credentials", nil, []string{"ls", good, "--s3-endpoint", "http://key:" + wrongSecret + "@127.0.0.1:bad port"}, exitUsage, "(not shown: it holds an @)"},
		{"part size below the minimum", nil, []string{"backup", src.URL, "s3://" + bucket + "/p.sofa", "--part-size", "1000"}, exitUsage, "below S3's minimum"},
		{"exists", nil, []string{"backup", src.URL, good}, exitUsage, "--force"},
		{"s3 since, local archive", nil, []string{"backup", src.URL, filepath.Join(t.TempDir(), "y.sofa"), "--since", good}, exitUsage, "needs an s3:// archive to write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s3Sofa(t, bin, append(append([]string{}, env...), tc.env...), tc.args...)
			r.want(t, tc.code)
			line := r.errLine(t)
			t.Logf("%s: exit %d: %s", tc.name, r.code, line)
			if !strings.Contains(line, tc.want) {
				t.Errorf("error line %q does not contain %q\nstderr:\n%s", line, tc.want, r.stderr)
			}
			switch {
			case tc.name == "truncated restore":
				// read in order up to the cut, as from stdin: the
				// summary comes before the error, and cannot count
				// the databases after the cut
				if !strings.Contains(r.stderr, "(of an unknown number: ") {
					t.Errorf("the summary does not say the number of databases is unknown:\n%s", r.stderr)
				}
			case strings.Count(strings.TrimSpace(r.stderr), "\n") > 0:
				t.Errorf("more than one line on stderr:\n%s", r.stderr)
			}
			if out := r.stderr + r.stdout; strings.Contains(out, wrongSecret) || strings.Contains(out, s3test.SecretKey) ||
				strings.Contains(out, s3test.AccessKey) || strings.Contains(out, "AKIANOSUCHKEY") {
				t.Errorf("output holds the secret:\n%s", r.stderr)
			}
		})
	}
	if k := s3Objects(t, s3srv.URL, bucket); len(k) != 4 {
		t.Errorf("objects %v, want from-local.sofa, good.sofa, half.sofa and notes.txt alone", k)
	}
}

// TestS3_InterruptAbortsUpload: SIGINT while a part is being sent ends
// the backup with exit 130 and aborts the multipart upload: no object,
// no upload in progress.
func TestS3_InterruptAbortsUpload(t *testing.T) {
	bin, s3srv, bucket, p, src := s3Proxied(t)
	arCreate(t, src, "media", true, s3AttDocs("m", 8, 1<<20)...)
	// every part hangs (until the client gives up)
	if err := p.SetRules(faultproxy.Rule{Name: "hang", Method: "PUT", Delay: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "backup", src.URL, "s3://"+bucket+"/cut.sofa", "--part-size", "5242880", "-q")
	cmd.Env = append(append(os.Environ(), s3srv.Env()...), "SOFA_S3_ENDPOINT="+p.URL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for p.Rule("hang").Matched == 0 { // a part is on its way
		select {
		case <-ctx.Done():
			t.Fatalf("no part was sent\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if len(s3test.Uploads(t, s3srv.URL, bucket)) != 1 {
		t.Fatal("no multipart upload in progress")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, stderr.String())
	}
	if u := s3test.Uploads(t, s3srv.URL, bucket); len(u) != 0 {
		t.Errorf("multipart uploads left: %v", u)
	}
	if k := s3Objects(t, s3srv.URL, bucket); len(k) != 0 {
		t.Errorf("objects left: %v", k)
	}
}
