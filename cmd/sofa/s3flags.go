package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/storage/s3"
)

// s3Flags configure s3://BUCKET/KEY archives (every verb that takes an
// archive). Credentials are never flags: the AWS SDK's chain reads them
// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the
// shared files, IMDS).
type s3Flags struct {
	endpoint  string
	region    string
	pathStyle bool
	transfers int
	partSize  int64
	idle      time.Duration
	// retry is the verb's --retry-time: S3 requests are retried about as
	// long as CouchDB ones.
	retry *time.Duration
	// log receives a line per retried S3 request (the verb's --verbose);
	// nil: none.
	log func(format string, args ...any)
}

func (f *s3Flags) register(fs *pflag.FlagSet, retry *time.Duration) {
	f.retry = retry
	fs.StringVar(&f.endpoint, "s3-endpoint", "", "URL of the S3-compatible service of s3:// archives (default: AWS, or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)")
	fs.StringVar(&f.region, "s3-region", "", "region of s3:// buckets (default: AWS_REGION or the profile's, else us-east-1)")
	fs.BoolVar(&f.pathStyle, "s3-path-style", false, "address s3:// buckets as ENDPOINT/BUCKET/KEY, not BUCKET.ENDPOINT/KEY (most S3-compatible servers need it)")
	fs.IntVar(&f.transfers, "transfers", s3.DefaultTransfers, "s3:// archives: parts uploaded, or ranges read ahead, at once (0: the default)")
	fs.Int64Var(&f.partSize, "part-size", s3.DefaultPartSize, "s3:// archives: bytes per uploaded part and per ranged read (0: the default, 16 MiB; at least 5 MiB, 5242880; doubles every 1,000 parts); memory is part size x (transfers + 1)")
	fs.DurationVar(&f.idle, "s3-idle-timeout", s3.DefaultIdleTimeout, "s3:// archives: how long a connection may move no data, either way, before its request is retried (0: the default, 2m; negative: never)")
}

func (f *s3Flags) options() s3.Options {
	o := s3.Options{Endpoint: f.endpoint, Region: f.region, PathStyle: f.pathStyle, Transfers: f.transfers, PartSize: f.partSize, IdleTimeout: f.idle, Log: f.log}
	if f.retry != nil {
		o.RetryTime = *f.retry
		if o.RetryTime <= 0 {
			o.RetryTime = couch.DefaultRetryTime
		}
	}
	return o
}

// openOptions are the sofa.OpenOptions of an archive location.
func (f *s3Flags) openOptions() sofa.OpenOptions {
	return sofa.OpenOptions{Store: archives, S3: f.options()}
}
