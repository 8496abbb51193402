// Package s3 is a storage.Store on S3 and S3-compatible object storage
// (AWS S3, MinIO, versitygw, Ceph RGW...), with the AWS SDK for Go v2.
//
// Archive names are locations s3://BUCKET/KEY. Credentials come from the
// SDK's standard chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
// AWS_PROFILE and the shared config and credentials files, SSO, IMDS on
// EC2...) unless Options.Credentials is set; the region likewise
// (AWS_REGION, the profile), then us-east-1.
//
// Writing streams an archive of unknown length as a multipart upload:
// Options.Transfers parts of Options.PartSize bytes in flight at once,
// each sent with its Content-MD5 and retried with backoff on 5xx,
// SlowDown, connection resets and timeouts. Abort (or any failure) aborts
// the multipart upload: nothing appears under the key. Commit completes
// the upload and then checks the object (its size, and its ETag against
// the parts' MD5s) before it returns. A stream shorter than one part is
// sent with one PutObject. Memory: PartSize x (Transfers + 1) plus a
// fixed overhead, whatever the archive's length.
//
// Reading opens the object once (HeadObject: size and ETag) and reads it
// with ranged GETs, Transfers of PartSize bytes ahead of the reader at
// most, delivered in order; ReadAt is one ranged GET. Every GET is
// conditional on the ETag seen at Open: an object replaced while it is
// read is an error, never a mix of two archives.
//
// A process killed during an upload leaves its multipart upload behind
// (invisible, but stored and billed). Create aborts those of its own key
// that their writers left (a writer of this host that died, a marker
// part not refreshed for 5 heartbeats, an upload sofa did not mark
// initiated over a day ago: see stale.go) and never one a running
// writer uses. An AbortIncompleteMultipartUpload lifecycle rule on the
// bucket removes the leftovers of keys never written again.
package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/sofadb/sofa/storage"
)

// Scheme is the location prefix of this store's names.
const Scheme = "s3://"

// Defaults of Options' zero values.
const (
	// DefaultPartSize is the part size of uploads and the size of each
	// ranged GET: 16 MiB.
	DefaultPartSize = 16 << 20
	// MinPartSize is S3's smallest part (all but the last): a smaller
	// PartSize is raised to it.
	MinPartSize = 5 << 20
	// DefaultTransfers is the number of parts (or ranged GETs) in flight.
	DefaultTransfers = 4
	// DefaultMaxAttempts is how often one request is tried before its
	// error is returned.
	DefaultMaxAttempts = 10
	// MaxParts is S3's limit on the parts of one multipart upload.
	MaxParts = 10000
	// partsPerSize is how many parts are sent at one part size before the
	// size doubles: 1,000 parts at PartSize, 1,000 at twice that... so
	// that 10,000 parts hold 1023 x 1,000 x PartSize (16 TiB at 16 MiB,
	// past S3's 5 TiB object limit).
	partsPerSize = 1000
)

// Options configure New. Zero values are the documented defaults.
type Options struct {
	// Endpoint is the URL of an S3-compatible service
	// (http://127.0.0.1:7070); "": AWS (or AWS_ENDPOINT_URL_S3 /
	// AWS_ENDPOINT_URL when set).
	Endpoint string
	// Region of the bucket; "": from the environment or profile, else
	// us-east-1.
	Region string
	// PathStyle addresses buckets as ENDPOINT/BUCKET/KEY instead of
	// BUCKET.ENDPOINT/KEY (most S3-compatible servers need it).
	PathStyle bool
	// Transfers is the number of parts uploaded, or ranges read ahead,
	// at once; 0: DefaultTransfers.
	Transfers int
	// PartSize is the size of each uploaded part and of each ranged GET
	// in bytes; 0: DefaultPartSize; at least MinPartSize (5 MiB: New
	// refuses less with ErrBadOption). An
	// upload doubles it every 1,000 parts, so a
	// stream of any length fits in the 9,999 data parts (see stale.go).
	PartSize int64
	// MaxAttempts is how often one request is tried (5xx, SlowDown,
	// connection resets, timeouts are retried with exponential backoff
	// and jitter); 0: DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff caps the wait between two attempts; 0: 10 s.
	MaxBackoff time.Duration
	// RetryTime is about how long one request may go on being retried
	// (an S3 service restarting, a network outage): MaxAttempts is raised
	// to as many attempts as fit in it at the backoff's pace (attempts
	// spaced by up to MaxBackoff, half of it on average once the backoff
	// has grown); 0: MaxAttempts alone.
	RetryTime time.Duration
	// Heartbeat is how often a writer uploads its upload's marker part
	// again (see Create); 0: DefaultHeartbeat (1 min). Create takes an
	// upload of its key whose marker is older than 5 heartbeats as left
	// by a writer that died: give every writer of a key the same.
	Heartbeat time.Duration
	// StaleAge is the age past which Create aborts an upload of its key
	// in progress that sofa did not mark (another tool's, or an older
	// sofa's); 0: DefaultStaleAge (24 h); negative: never.
	StaleAge time.Duration
	// IdleTimeout is how long a connection may move no byte, either way
	// (no answer byte, no request byte sent), before its request fails
	// with an *IdleError and is retried (a stalled read or upload would
	// otherwise wait forever); 0: DefaultIdleTimeout (2 min); negative:
	// none. It applies to the default HTTPClient only.
	IdleTimeout time.Duration
	// Credentials, when set, replace the standard credential chain.
	Credentials aws.CredentialsProvider
	// HTTPClient sends the requests; nil: one with connect and
	// answer-header timeouts.
	HTTPClient *http.Client
	// Log, if set, receives one line per retry of a request: its
	// operation, the wait before the next attempt and the error
	// (credentials never included). Nil: retries are silent.
	Log func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Transfers <= 0 {
		o.Transfers = DefaultTransfers
	}
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	o.PartSize = max(o.PartSize, MinPartSize)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	o.MaxAttempts = max(o.MaxAttempts, attemptsFor(o.RetryTime, o.MaxBackoff))
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.StaleAge == 0 {
		o.StaleAge = DefaultStaleAge
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	return o
}

// Store is the storage.Store of s3:// locations.
type Store struct {
	c  *awss3.Client
	o  Options
	ct *contact
}

var (
	_ storage.Store    = (*Store)(nil)
	_ storage.Parallel = (*Store)(nil)
)

// New makes a Store. It loads the SDK's configuration (credentials are
// resolved at the first request) and sends nothing.
func New(ctx context.Context, o Options) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	var hc config.HTTPClient = o.HTTPClient
	if o.HTTPClient == nil {
		// a buildable client: AWS_CA_BUNDLE and the like can still add
		// to its TLS settings
		hc = awshttp.NewBuildableClient().WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = 30 * time.Second
		}).WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost = 64
			tr.ResponseHeaderTimeout = 2 * time.Minute
			if o.IdleTimeout > 0 {
				tr.DialContext = idleDial(tr.DialContext, o.IdleTimeout)
			}
		})
	}
	ct := contactOf(o.Endpoint)
	lo := []func(*config.LoadOptions) error{
		config.WithHTTPClient(hc),
		// the SDK logs its own warnings to stderr ("failed to discard
		// remaining HTTP response body" after a read cut short): errors
		// reach the caller as errors, nothing else is printed
		config.WithLogger(logging.Nop{}),
		// sofa sets its own timeouts and retryer; a defaults mode other
		// than legacy (AWS_DEFAULTS_MODE) would remake the dialer and
		// drop the idle timeout
		config.WithDefaultsMode(aws.DefaultsModeLegacy),
		config.WithRetryer(func() aws.Retryer {
			var r aws.RetryerV2 = contactRetryer{RetryerV2: retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = o.MaxAttempts
				so.MaxBackoff = o.MaxBackoff
				so.RateLimiter = ratelimit.None // every failed request may retry
			}), ct: ct, retryTime: o.RetryTime}
			if o.Log == nil {
				return r
			}
			return loggingRetryer{RetryerV2: r, log: o.Log}
		}),
	}
	if o.Region != "" {
		lo = append(lo, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		lo = append(lo, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("s3: configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	// Each part carries its Content-MD5; no trailing checksums (aws-chunked
	// bodies that not every S3-compatible server reads).
	cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	c := awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		so.APIOptions = append(so.APIOptions, ct.watch)
	})
	return &Store{c: c, o: o, ct: ct}, nil
}

// Unanswered says how long the service's requests have gone without an
// answer (an outage in progress, its requests retried); ok is false while
// it answers.
func (s *Store) Unanswered() (d time.Duration, ok bool) {
	t := s.ct.down.Load()
	if t == 0 {
		return 0, false
	}
	return time.Since(time.Unix(0, t)), true
}

// Service names the S3 service: its endpoint, or "AWS S3".
func (s *Store) Service() string {
	if s.o.Endpoint == "" {
		return "AWS S3"
	}
	return s.o.Endpoint
}

// Client is the store's S3 client.
func (s *Store) Client() *awss3.Client { return s.c }

// Options are the store's options, defaults filled in.
func (s *Store) Options() Options { return s.o }

// Parallelism returns the store's transfers and part size
// (storage.Parallel).
func (s *Store) Parallelism() (int, int64) { return s.o.Transfers, s.o.PartSize }

// ErrBadLocation: a name that is not s3://BUCKET/KEY.
var ErrBadLocation = errors.New("not an s3://BUCKET/KEY location")

// ErrBadOption is what New answers to Options it cannot use (an
// Endpoint that is no http(s) URL, a PartSize below MinPartSize).
var ErrBadOption = errors.New("bad S3 option")

// check refuses options no request could use.
func (o Options) check() error {
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: endpoint %s is not an http(s)://HOST[:PORT] URL", ErrBadOption, shownEndpoint(o.Endpoint, u, err))
		}
		if u.User != nil {
			return fmt.Errorf("%w: endpoint %s carries credentials: S3 credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE", ErrBadOption, u.Redacted())
		}
	}
	if o.PartSize > 0 && o.PartSize < MinPartSize {
		return fmt.Errorf("%w: part size %d bytes is below S3's minimum of %d (5 MiB)", ErrBadOption, o.PartSize, MinPartSize)
	}
	return nil
}

// shownEndpoint is an endpoint as an error may show it: with its
// password masked, and not at all when it does not parse and holds an
// "@" (it may then hold credentials no parser can find).
func shownEndpoint(raw string, u *url.URL, err error) string {
	switch {
	case err == nil && u.User != nil:
		return strconv.Quote(u.Redacted())
	case err == nil:
		return strconv.Quote(raw)
	case strings.Contains(raw, "@"):
		return "(not shown: it holds an @)"
	}
	return strconv.Quote(raw)
}

// ErrAccess: the store refused the credentials or the operation.
var ErrAccess = errors.New("access denied (check the credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, and the bucket's permissions)")

// Parse splits an s3://BUCKET/KEY location.
func Parse(location string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(location, Scheme)
	if !ok {
		return "", "", fmt.Errorf("%q: %w", Redact(location), ErrBadLocation)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" || key == "" || strings.HasSuffix(key, "/") {
		return "", "", fmt.Errorf("%q: %w", Redact(location), ErrBadLocation)
	}
	return bucket, key, nil
}

// Redact returns location without credentials: an s3:// location has
// none, but one written as s3://KEY:SECRET@bucket/... loses them.
func Redact(location string) string {
	rest, ok := strings.CutPrefix(location, Scheme)
	if !ok {
		return location
	}
	host, path, hasPath := strings.Cut(rest, "/")
	if i := strings.LastIndex(host, "@"); i >= 0 {
		host = "***@" + host[i+1:]
	}
	if !hasPath {
		return Scheme + host
	}
	return Scheme + host + "/" + path
}

// errCode is the S3 error code of err ("" when it is none).
func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isNotFound: a missing key (or bucket: HEAD answers a bare 404).
func isNotFound(err error) bool {
	switch errCode(err) {
	case "NoSuchKey", "NotFound", "NoSuchBucket":
		return true
	}
	return httpStatus(err) == http.StatusNotFound
}

// fail turns an SDK error into one line naming the location: missing
// bucket or key wrap storage.ErrNotExist, refused credentials ErrAccess;
// others keep the S3 code and the operation, never credentials.
func (s *Store) fail(ctx context.Context, op, bucket, key string, err error) error {
	loc := Scheme + bucket + "/" + key
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s archive %s: %w", op, loc, err)
	}
	code := errCode(err)
	switch {
	case code == "NoSuchUpload":
		return fmt.Errorf("%s archive %s: its multipart upload is gone (aborted by another writer of the key, or by the bucket's lifecycle rule)", op, loc)
	case code == "NoSuchBucket":
		return fmt.Errorf("archive %s: bucket %s %w", loc, bucket, storage.ErrNotExist)
	case isNotFound(err):
		if err := s.checkBucket(ctx, op, bucket, key); err != nil {
			return err
		}
		return fmt.Errorf("archive %s %w", loc, storage.ErrNotExist)
	case isAccess(err):
		return fmt.Errorf("%s archive %s: %w", op, loc, ErrAccess)
	case noCredentials(err):
		return fmt.Errorf("%s archive %s: %w: none were found", op, loc, ErrAccess)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		hint := ""
		switch ae.ErrorCode() {
		case "AuthorizationHeaderMalformed", "BadRequest", "PermanentRedirect", "IllegalLocationConstraintException":
			hint = " (is the bucket's region the one given? --s3-region, AWS_REGION)"
		}
		return fmt.Errorf("%s archive %s: %s: %s%s", op, loc, ae.ErrorCode(), oneLine(ae.ErrorMessage()), hint)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s archive %s: %w", op, loc, ue.Err)
	}
	return fmt.Errorf("%s archive %s: %w", op, loc, err)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// noCredentials: the SDK's credential chain found none (no keys in the
// environment, no profile, no instance role): its error is a long chain
// ending in the instance metadata service's refusal.
func noCredentials(err error) bool {
	return strings.Contains(err.Error(), "get credentials") || strings.Contains(err.Error(), "failed to refresh cached credentials")
}

// isAccess: the store refused the credentials or the operation.
// XAdminUserNotFound is versitygw's answer (a 404) to an unknown access
// key, where AWS answers InvalidAccessKeyId (a 403).
func isAccess(err error) bool {
	switch errCode(err) {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden",
		"InvalidToken", "ExpiredToken", "XAdminUserNotFound":
		return true
	}
	return httpStatus(err) == http.StatusForbidden
}

// checkBucket tells why a HEAD of a key answered a bare 404 (a HEAD has
// no body to say): the error of a missing bucket, of refused credentials
// (some S3-compatible servers answer an unknown access key with a 404),
// or nil when the bucket is there (the key is missing). A HEAD of the
// bucket answers a bare 404 too: a listing of one key, whose answer has a
// body, tells them apart.
func (s *Store) checkBucket(ctx context.Context, op, bucket, key string) error {
	loc := Scheme + bucket + "/" + key
	_, err := s.c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil || !isNotFound(err) {
		return nil
	}
	_, err = s.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(1)})
	switch {
	case err == nil:
		return nil
	case isAccess(err):
		return fmt.Errorf("%s archive %s: %w", op, loc, ErrAccess)
	}
	return fmt.Errorf("archive %s: bucket %s %w", loc, bucket, storage.ErrNotExist)
}

// Stat describes the object.
func (s *Store) Stat(ctx context.Context, name string) (storage.Info, error) {
	bucket, key, err := Parse(name)
	if err != nil {
		return storage.Info{}, err
	}
	h, err := s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return storage.Info{}, s.fail(ctx, "stat", bucket, key, err)
	}
	return storage.Info{Name: name, Size: aws.ToInt64(h.ContentLength), ModTime: aws.ToTime(h.LastModified)}, nil
}

// Remove deletes the object (storage.ErrNotExist when there is none).
func (s *Store) Remove(ctx context.Context, name string) error {
	if _, err := s.Stat(ctx, name); err != nil {
		return err
	}
	bucket, key, _ := Parse(name)
	if _, err := s.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil {
		return s.fail(ctx, "remove", bucket, key, err)
	}
	return nil
}

// attemptsFor is how many attempts fit in retryTime when the waits
// between them grow to maxBackoff with full jitter (half of it on
// average): the first few, shorter, waits are the slack. 0 for no
// retryTime.
func attemptsFor(retryTime, maxBackoff time.Duration) int {
	if retryTime <= 0 {
		return 0
	}
	return int(retryTime/(maxBackoff/2)) + 4
}
