package couch

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// newTransport builds the HTTP transport of a client: connection limits
// from MaxConns, TLS from the CA, client certificate and verification
// options, and the proxy named by HTTPS_PROXY, HTTP_PROXY and NO_PROXY
// (http.ProxyFromEnvironment; Go never sends requests to localhost or a
// loopback address through a proxy, whatever NO_PROXY says).
func newTransport(opts *Options, host string) (*http.Transport, error) {
	tc, err := opts.tlsConfig()
	if err != nil {
		return nil, err
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          opts.MaxConns * 2,
		MaxIdleConnsPerHost:   opts.MaxConns,
		MaxConnsPerHost:       opts.MaxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 0,
		ReadBufferSize:        64 << 10,
		WriteBufferSize:       64 << 10,
		TLSClientConfig:       tc,
		// Gzip answers save bandwidth across a network but cost the
		// server CPU for nothing on loopback.
		DisableCompression: isLoopback(host),
	}, nil
}

// tlsConfig is the TLS configuration the options ask for. Errors name the
// files, never their contents.
func (o *Options) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CACertFile != "" {
		b, err := os.ReadFile(o.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("CA certificates: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA certificates %s: no PEM certificate in the file", o.CACertFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case o.ClientCertFile != "" && o.ClientKeyFile == "":
		return nil, errors.New("client certificate given without its key")
	case o.ClientCertFile == "" && o.ClientKeyFile != "":
		return nil, errors.New("client key given without its certificate")
	case o.ClientCertFile != "":
		cert, err := tls.LoadX509KeyPair(o.ClientCertFile, o.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", o.ClientCertFile, o.ClientKeyFile, err)
		}
		// The certificate is sent whenever the server asks for one, even
		// when the server's list of acceptable CAs does not name its
		// issuer: the operator chose it, and the server's refusal says
		// more than a handshake without a certificate.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg, nil
}

// permanentTLS reports a TLS failure that retrying does not cure: the
// server's certificate is not trusted or does not name the host, or the
// server refused the handshake with an alert (no or a bad client
// certificate, no common protocol version).
func permanentTLS(err error) bool {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
		rerr tls.RecordHeaderError
		oerr *net.OpError
	)
	switch {
	case errors.As(err, &verr), errors.As(err, &uerr), errors.As(err, &herr), errors.As(err, &cerr):
		return true
	case errors.As(err, &rerr):
		return true // plain HTTP answered an https request
	case errors.As(err, &oerr) && oerr.Op == "remote error":
		return true // a TLS alert from the server
	}
	return false
}
