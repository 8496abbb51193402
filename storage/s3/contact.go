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
// waiting out RetryTime in turn, silently. Once the service answered,
// RetryTime applies (an outage during a run is waited out).
const FirstContactTime = 5 * time.Second

// contacts holds a contact per endpoint: the Stores of one service, in
// one process, share what they learnt of it (a run opens several).
var contacts sync.Map // endpoint ("" for AWS's) -> *contact

// contactOf returns the contact of endpoint.
func contactOf(endpoint string) *contact {
	c, _ := contacts.LoadOrStore(endpoint, &contact{})
	return c.(*contact)
}

// contact is whether the service answered a request yet.
type contact struct {
	answered atomic.Bool
	first    atomic.Int64 // unix nanoseconds of the first attempt; 0: none yet
}

// contactRetryer stops retrying once FirstContactTime has passed since
// the first attempt while no attempt got an answer (contact.watch).
type contactRetryer struct {
	aws.RetryerV2
	ct *contact
}

func (r contactRetryer) IsErrorRetryable(err error) bool {
	if !r.ct.answered.Load() {
		if f := r.ct.first.Load(); f != 0 && time.Since(time.Unix(0, f)) > FirstContactTime {
			return false
		}
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
			}
			return out, md, err
		}), middleware.After)
}
