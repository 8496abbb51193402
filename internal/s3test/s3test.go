// Package s3test starts a real S3-compatible server for tests: versitygw
// (github.com/versity/versitygw) with its posix backend, on a free
// loopback port, over a temporary directory, with root credentials.
//
// The binary is .work/tools/versitygw-VERSION/versitygw at the module
// root, as `make deps` installs it (or SOFA_VERSITYGW). When it is absent
// the first test installs it there with go install (from the module
// proxy); a test skips, saying why, only when that fails too.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the versitygw release the project uses (Makefile
// VERSITYGW_VERSION).
const Version = "v1.8.0"

// Root credentials of every server this package starts (test-only).
const (
	AccessKey = "sofatestaccess"
	SecretKey = "sofatestsecret0123456789"
	Region    = "us-east-1"
)

// Server is a running versitygw.
type Server struct {
	// URL is its endpoint, http://127.0.0.1:PORT (path-style buckets).
	URL string
	// Dir is the posix backend's directory (a bucket is a directory).
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
}

var (
	installMu  sync.Mutex
	installErr error
	installed  string
)

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("no go.mod above the working directory")
		}
		d = up
	}
}

// Binary returns the versitygw binary, installing it when absent.
func Binary() (string, error) {
	if p := os.Getenv("SOFA_VERSITYGW"); p != "" {
		return p, nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if installed != "" || installErr != nil {
		return installed, installErr
	}
	root, err := moduleRoot()
	if err != nil {
		installErr = err
		return "", err
	}
	dir := filepath.Join(root, ".work", "tools", "versitygw-"+Version)
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err == nil {
		installed = bin
		return bin, nil
	}
	// Several test binaries may get here at once: one installs, under a
	// lock file, the others wait for it.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		installErr = err
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		installErr = err
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		installErr = err
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		installed = bin
		return bin, nil
	}
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "install", "github.com/versity/versitygw/cmd/versitygw@"+Version)
	cmd.Dir = os.TempDir() // outside this module: its go.mod does not apply
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		installErr = fmt.Errorf("go install versitygw %s: %v: %s", Version, err, strings.TrimSpace(lastLines(string(out), 3)))
		return "", installErr
	}
	installed = bin
	return bin, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// Start starts a server for t (stopped at Cleanup), or skips t when
// versitygw is absent and cannot be installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Skipf("no S3 server: versitygw is not installed and could not be (run make deps): %v", err)
	}
	s, err := start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartDir starts a server over dir outside a test (the benchmark driver);
// the caller stops it.
func StartDir(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return start(bin, dir)
}

func start(bin, dir string) (*Server, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addr := ln.Addr().String()
		ln.Close()
		log, err := os.Create(filepath.Join(dir, "versitygw.log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
			"--port", addr, "posix", data)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID=", "ROOT_SECRET_ACCESS_KEY=")
		if err := cmd.Start(); err != nil {
			log.Close()
			return nil, fmt.Errorf("start versitygw: %w", err)
		}
		s := &Server{URL: "http://" + addr, Dir: data, cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); log.Close(); close(s.done) }()
		if err := s.waitReady(30 * time.Second); err != nil {
			s.Stop()
			b, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
			if strings.Contains(string(b), "address already in use") {
				continue // the port was taken between Close and the server's listen
			}
			return nil, fmt.Errorf("versitygw did not start: %v: %s", err, lastLines(string(b), 5))
		}
		return s, nil
	}
	return nil, errors.New("versitygw: no free port after 5 tries")
}

// waitReady polls until the server answers HTTP.
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-s.done:
			return errors.New("versitygw exited")
		default:
		}
		resp, err := http.Get(s.URL + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the server and waits for it.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Credentials are the root credentials.
func Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")
}

// Client is an S3 client of endpoint (the server's URL or a proxy's in
// front of it) with the root credentials, path-style.
func Client(endpoint string) *awss3.Client {
	return awss3.New(awss3.Options{
		Region: Region, Credentials: Credentials(), BaseEndpoint: aws.String(endpoint),
		UsePathStyle:               true,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// Bucket creates a bucket of a fresh name and returns it.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	name = strings.Trim(fmt.Sprintf("b%d-%s", time.Now().UnixNano()%1e6, name), "-")
	if _, err := Client(s.URL).CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// Env is the environment that points the AWS SDK (and sofa) at s: root
// credentials, region, endpoint, path-style.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=" + Region, "AWS_ENDPOINT_URL=" + s.URL, "SOFA_S3_PATH_STYLE=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
	}
}

// Uploads lists the multipart uploads in progress in bucket (a test
// checks that an aborted upload left none).
func Uploads(t testing.TB, endpoint, bucket string) []string {
	t.Helper()
	out, err := Client(endpoint).ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}
