package s3

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// loggingRetryer is the SDK's retryer telling Options.Log of each retry.
type loggingRetryer struct {
	aws.RetryerV2
	log func(format string, args ...any)
}

// RetryDelay is the wait before attempt+1, logged with the error that
// failed attempt. The SDK's errors name the method and URL (bucket and
// key) or the operation, never the credentials (an endpoint carrying
// some is refused by New).
func (r loggingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, derr := r.RetryerV2.RetryDelay(attempt, err)
	if derr == nil {
		r.log("s3: retry %d in %s: %v", attempt, d.Round(time.Millisecond), err)
	}
	return d, derr
}
