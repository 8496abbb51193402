package s3

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// FirstContactTime is how long a Store's requests are retried before the
// S3 service answered any of them (an answer: a response, even an error
// status): a service not there at the start fails the run within it, as
// the first request to a CouchDB server does, instead of each request
// waiting out RetryTime in turn, silently. Once the service answered, a
// request is retried until RetryTime has passed since the attempts began
// to go unanswered (with RetryTime zero, MaxAttempts alone): an outage
// during a run is waited out once, not once per request in turn (a
// restore of 25 databases from an S3 service that went away took 19
// times RetryTime).
const FirstContactTime = 5 * time.Second

// contacts holds a contact per endpoint: the Stores of one service, in
// one process, share what they learnt of it (a run opens several).
var contacts sync.Map // endpoint ("" for AWS's) -> *contact

// contactOf returns the contact of endpoint.
func contactOf(endpoint string) *contact {
	c, _ := contacts.LoadOrStore(endpoint, &contact{})
	return c.(*contact)
}

// contact is whether the service answered a request yet, when the
// first attempt went out, and when the attempts began to go unanswered
// since the last answer (unix nanoseconds; 0: never, or none since).
type contact struct {
	answered atomic.Bool
	first    atomic.Int64
	down     atomic.Int64
}

// contactRetryer stops retrying once FirstContactTime has passed since
// the first attempt while no attempt got an answer, or RetryTime since
// the attempts began to go unanswered (contact.watch).
type contactRetryer struct {
	aws.RetryerV2
	ct        *contact
	retryTime time.Duration
}

func (r contactRetryer) IsErrorRetryable(err error) bool {
	if !r.ct.answered.Load() {
		if f := r.ct.first.Load(); f != 0 && time.Since(time.Unix(0, f)) > FirstContactTime {
			return false
		}
	} else if d := r.ct.down.Load(); r.retryTime > 0 && d != 0 && time.Since(time.Unix(0, d)) > r.retryTime {
		return false
	}
	return r.RetryerV2.IsErrorRetryable(err)
}

// watch is the S3 client's middleware that notes each attempt, and an
// answer when one came (a response, whatever its status), closest to the
// transport: it sees every attempt of every request.
func (c *contact) watch(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("SofaContact",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			c.first.CompareAndSwap(0, time.Now().UnixNano())
			out, md, err := next.HandleDeserialize(ctx, in)
			if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp != nil && resp.Response != nil && resp.StatusCode > 0 {
				c.answered.Store(true)
				c.down.Store(0)
			} else if err != nil {
				c.down.CompareAndSwap(0, time.Now().UnixNano())
			}
			return out, md, err
		}), middleware.After)
}
