package limit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Outcome is what happened to one request, reported with Token.Done.
type Outcome struct {
	// Status is the HTTP status code; 0 when no response arrived (see Err).
	Status int
	// Err is the transport error, if any. Timeouts (context.DeadlineExceeded
	// or a net.Error whose Timeout() is true) count as overload;
	// context.Canceled makes the outcome say nothing about the server;
	// other errors (refused, reset) are counted but do not move the limit.
	Err error
	// Overload flags an overload the status alone does not show, such as a
	// CouchDB 500 whose error is "all_dbs_active". 429 and 503 are overload
	// without this flag.
	Overload bool
	// Latency is the server's part of the request, best measured up to the
	// response headers so that body size does not look like load. Zero means
	// the time from Acquire to Done.
	Latency time.Duration
	// RetryAfter is the server's Retry-After delay (see RetryAfter). When
	// positive, new requests to this host wait that long, capped by
	// Options.MaxPause.
	RetryAfter time.Duration
	// Ignore makes the outcome say nothing about server load: the slot is
	// returned and nothing is counted. Use it for requests abandoned by the
	// caller and for long streams (a continuous _changes feed).
	Ignore bool
}

// IsOverload reports whether the outcome is an overload signal.
func (o Outcome) IsOverload() bool {
	return o.Overload || OverloadStatus(o.Status) || IsTimeout(o.Err)
}

func (o Outcome) ignored() bool {
	return o.Ignore || (o.Err != nil && errors.Is(o.Err, context.Canceled))
}

// OverloadStatus reports whether an HTTP status means the server is
// overloaded: 429 Too Many Requests and 503 Service Unavailable.
func OverloadStatus(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// IsTimeout reports whether err is a timeout: context.DeadlineExceeded or a
// net.Error whose Timeout() is true. A nil error is not a timeout.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
