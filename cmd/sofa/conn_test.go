package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/recproxy"
)

// Connection options (issue 11, item 7), end to end: CouchDB serving TLS
// with certificates made here, a client certificate the server requires,
// cookie authentication seen at a recording proxy, and an HTTP proxy from
// the environment.

// testCA is a certificate authority made by a test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM string // file holding the CA certificate
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, certPEM: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.certPEM, "CERTIFICATE", der)
	return ca
}

// issue makes a certificate for 127.0.0.1 (server) or a client, and
// returns the certificate and key files.
func (ca *testCA) issue(t *testing.T, dir, name string, client bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses, tmpl.DNSNames = nil, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startTLSCouch starts a CouchDB that also serves https with a certificate
// of ca (CouchDB's [ssl] section, plus extra settings of that section) and
// returns it with its https URL (admin credentials included).
func startTLSCouch(t *testing.T, ca *testCA, dir string, extra map[string]string) (*couchtest.Server, string) {
	t.Helper()
	couchtest.RequireKind(t, couchtest.CouchDB, "TLS is configured in CouchDB's [ssl] section")
	if os.Getenv(couchtest.EnvCouchURL) != "" {
		t.Skip("a CouchDB named by " + couchtest.EnvCouchURL + " cannot be given a TLS listener by the test")
	}
	certFile, keyFile := ca.issue(t, dir, "server", false)
	port := freePort(t)
	cfg := map[string]string{
		"ssl/enable":    "true",
		"ssl/port":      strconv.Itoa(port),
		"ssl/cert_file": certFile,
		"ssl/key_file":  keyFile,
	}
	for k, v := range extra {
		cfg["ssl/"+k] = v
	}
	srv := couchtest.StartWith(t, couchtest.Options{Config: cfg})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme, u.Host = "https", "127.0.0.1:"+strconv.Itoa(port)
	return srv, u.String()
}

// oneLine checks that stderr is one line holding want, and none of
// secrets.
func oneLine(t *testing.T, r cliResult, want string, secrets ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("stderr should be one line with %q, got:\n%s", want, r.stderr)
	}
	for _, s := range secrets {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Fatalf("output holds a secret:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	}
}

// TestConn_TLS: a copy over https trusts the CA named by --ca-cert and is
// equal to the source (compared over plain http); a CA that did not sign
// the server's certificate fails with one line and exit 1, per endpoint
// (--target-ca-cert wins over --ca-cert); --insecure copies and warns.
func TestConn_TLS(t *testing.T) {
	bin := sofaBin(t)
	dir := t.TempDir()
	ca, other := newTestCA(t, dir, "good"), newTestCA(t, dir, "other")
	srv, https := startTLSCouch(t, ca, dir, nil)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 300)
	pw := srv.AdminPassword

	r := cliRun(t, bin, "replicate", https+"/src", https+"/dst", "--create-target", "--ca-cert", ca.certPEM)
	r.wantCode(t, 0)
	couchtest.AssertEqual(t, srv.URL+"/src", srv.URL+"/dst")

	// the system's CAs do not know the test's
	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst2", "--create-target")
	r.wantCode(t, 1)
	oneLine(t, r, "source: ", pw)
	oneLine(t, r, "certificate signed by unknown authority", pw)

	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst2", "--create-target", "--ca-cert", other.certPEM)
	r.wantCode(t, 1)
	oneLine(t, r, "certificate signed by unknown authority", pw)
	// and an untrusted certificate is not retried
	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst2", "--create-target", "--ca-cert", other.certPEM, "--verbose")
	r.wantCode(t, 1)
	if strings.Contains(r.stderr, "retry") {
		t.Fatalf("an untrusted certificate was retried:\n%s", r.stderr)
	}

	// per endpoint: the source's CA is right, the target's wrong
	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst2", "--create-target", "--ca-cert", ca.certPEM, "--target-ca-cert", other.certPEM)
	r.wantCode(t, 1)
	oneLine(t, r, "target: ", pw)
	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst2", "--create-target", "--ca-cert", other.certPEM, "--source-ca-cert", ca.certPEM, "--target-ca-cert", ca.certPEM)
	r.wantCode(t, 0)
	couchtest.AssertEqual(t, srv.URL+"/src", srv.URL+"/dst2")

	// a CA file that holds no certificate is named, and is exit 1
	bad := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(bad, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cliRun(t, bin, "verify", https+"/src", https+"/dst", "--ca-cert", bad)
	r.wantCode(t, 1)
	oneLine(t, r, "no PEM certificate", pw)

	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst3", "--create-target", "--insecure")
	r.wantCode(t, 0)
	if n := strings.Count(r.stderr, "NOT verified"); n != 1 {
		t.Fatalf("--insecure should warn once on stderr, got %d warnings:\n%s", n, r.stderr)
	}
	couchtest.AssertEqual(t, srv.URL+"/src", srv.URL+"/dst3")
	// the config file names the CA as well (and SOFA_CA_CERT, as every
	// flag's variable)
	conf := filepath.Join(dir, "sofa.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("ca-cert = %q\n", ca.certPEM)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst4", "--create-target", "--config", conf)
	r.wantCode(t, 0)
	couchtest.AssertEqual(t, srv.URL+"/src", srv.URL+"/dst4")
	t.Setenv("SOFA_CA_CERT", other.certPEM)
	r = cliRun(t, bin, "verify", https+"/src", https+"/dst4")
	r.wantCode(t, 1)
	oneLine(t, r, "certificate signed by unknown authority", pw)
	t.Setenv("SOFA_CA_CERT", "")
	// the environment sets it as well, and warns as loudly
	t.Setenv("SOFA_INSECURE", "true")
	r = cliRun(t, bin, "verify", https+"/src", https+"/dst3", "--quiet")
	r.wantCode(t, 0)
	oneLine(t, r, "NOT verified", pw)
}

// TestConn_ClientCertRequired: a CouchDB that requires a client
// certificate refuses a client without one (one line, exit 1) and accepts
// the one given by --client-cert and --client-key.
func TestConn_ClientCertRequired(t *testing.T) {
	bin := sofaBin(t)
	dir := t.TempDir()
	ca := newTestCA(t, dir, "good")
	srv, https := startTLSCouch(t, ca, dir, map[string]string{
		"verify_ssl_certificates": "true", "fail_if_no_peer_cert": "true", "cacert_file": ca.certPEM,
	})
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 200)
	pw := srv.AdminPassword
	cert, key := ca.issue(t, dir, "client", true)

	r := cliRun(t, bin, "replicate", https+"/src", https+"/dst", "--create-target", "--ca-cert", ca.certPEM)
	r.wantCode(t, 1)
	oneLine(t, r, "source: ", pw)
	if !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("the error should say a certificate is missing:\n%s", r.stderr)
	}

	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst", "--create-target", "--ca-cert", ca.certPEM, "--client-cert", cert)
	r.wantCode(t, 2) // a certificate without its key is a usage error

	r = cliRun(t, bin, "replicate", https+"/src", https+"/dst", "--create-target", "--ca-cert", ca.certPEM, "--client-cert", cert, "--client-key", key)
	r.wantCode(t, 0)
	couchtest.AssertEqual(t, srv.URL+"/src", srv.URL+"/dst")
	keyPEM, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	keyBody := strings.Split(string(keyPEM), "\n")[1]
	if strings.Contains(r.stdout+r.stderr, keyBody) {
		t.Fatal("output holds the client key")
	}
}

// TestConn_CookieAuth: with --auth cookie the password crosses the wire
// once per server, to POST /_session; every other request carries the
// AuthSession cookie and no Authorization header. A wrong password is one
// line, exit 1, without the password.
func TestConn_CookieAuth(t *testing.T) {
	bin := sofaBin(t)
	const pw = "cookie-s3cret"
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: pw})
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 300)
	p := recproxy.Start(t, srv.URL)
	base := p.UserURL("admin", pw)

	r := cliRun(t, bin, "replicate", base+"/src", base+"/dst", "--create-target", "--auth", "cookie")
	r.wantCode(t, 0)
	if strings.Contains(r.stderr, "warning") {
		t.Fatalf("cookie login should work without a warning:\n%s", r.stderr)
	}
	admin := srv.AdminURL()
	couchtest.AssertEqual(t, admin+"/src", admin+"/dst")
	logins, anonymous := 0, 0
	for _, e := range p.Exchanges() {
		if e.AuthScheme != "" {
			t.Errorf("%s %s carried an Authorization header (%s)", e.Method, e.Path, e.AuthScheme)
		}
		if e.Method == "GET" && len(e.Cookies) == 0 && e.AuthScheme == "" && anonymous < 4 {
			anonymous++ // a database URL's probe (and its parent's), without credentials
			continue
		}
		if e.Path == "/_session" {
			logins++
			if e.Method != "POST" || e.ReqBytes == 0 {
				t.Errorf("login: %s /_session with %d bytes", e.Method, e.ReqBytes)
			}
			continue
		}
		if !slices.Contains(e.Cookies, "AuthSession") {
			t.Errorf("%s %s carried no AuthSession cookie (cookies %v)", e.Method, e.Path, e.Cookies)
		}
	}
	if logins < 1 || logins > 2 {
		t.Errorf("%d logins, want one per server handle (1 or 2)", logins)
	}

	// The environment selects it as well.
	p.Reset()
	t.Setenv("SOFA_AUTH", "cookie")
	r = cliRun(t, bin, "verify", base+"/src", base+"/dst")
	r.wantCode(t, 0)
	if len(p.Filter("POST", "/_session")) == 0 {
		t.Error("SOFA_AUTH=cookie did not log in")
	}

	r = cliRun(t, bin, "replicate", p.UserURL("admin", "wrong-"+pw)+"/src", base+"/dst", "--auth", "cookie")
	r.wantCode(t, 1)
	oneLine(t, r, "authentication failed", pw, "wrong-"+pw)

	r = cliRun(t, bin, "replicate", base+"/src", base+"/dst", "--auth", "token")
	r.wantCode(t, 2)
}

// TestConn_CookieFallback: a server without /_session (404 there, made by
// the fault proxy) gets basic authentication with a warning, and the copy
// succeeds.
func TestConn_CookieFallback(t *testing.T) {
	bin := sofaBin(t)
	const pw = "fallback-s3cret"
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: pw})
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 50)
	fp := faultproxy.StartT(t, srv.URL)
	if err := fp.SetRules(faultproxy.Rule{Name: "no-session", Path: "^/_session$", Fault: faultproxy.Status, Status: 404}); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(fp.URL)
	u.User = url.UserPassword("admin", pw)
	r := cliRun(t, bin, "replicate", u.String()+"/src", u.String()+"/dst", "--create-target", "--auth", "cookie")
	r.wantCode(t, 0)
	if !strings.Contains(r.stderr, "has no /_session") || strings.Contains(r.stderr, pw) {
		t.Fatalf("want a warning about the fallback (without the password):\n%s", r.stderr)
	}
	admin := srv.AdminURL()
	couchtest.AssertEqual(t, admin+"/src", admin+"/dst")
}

// forwardProxy is a plain HTTP forward proxy (no CONNECT) that sends every
// request, whatever host it names, to one server, and counts them.
type forwardProxy struct {
	URL   string
	mu    sync.Mutex
	hosts map[string]int
}

func startForwardProxy(t *testing.T, target string) *forwardProxy {
	t.Helper()
	tu, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tu.User = nil
	fp := &forwardProxy{hosts: map[string]int{}}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(tu)
		pr.Out.Host = tu.Host
	}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		fp.mu.Lock()
		fp.hosts[r.URL.Host]++
		fp.mu.Unlock()
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	fp.URL = "http://" + ln.Addr().String()
	return fp
}

func (fp *forwardProxy) count(host string) int {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.hosts[host]
}

// TestConn_ProxyFromEnvironment: HTTP_PROXY sends every request through
// the proxy (the URLs name a host that does not resolve: only the proxy
// knows where it is), and NO_PROXY exempts a host from it.
func TestConn_ProxyFromEnvironment(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 100)
	fp := startForwardProxy(t, srv.URL)
	su, _ := url.Parse(srv.URL)
	const host = "couchdb.sofa-test.invalid:5984"
	via := &url.URL{Scheme: "http", User: su.User, Host: host}
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(k, "")
	}
	t.Setenv("HTTP_PROXY", fp.URL)
	r := cliRun(t, bin, "replicate", via.String()+"/src", via.String()+"/dst", "--create-target")
	r.wantCode(t, 0)
	if fp.count(host) == 0 {
		t.Fatal("no request went through the proxy")
	}
	couchtest.AssertEqual(t, srv.URL+"/src", srv.URL+"/dst")

	t.Setenv("NO_PROXY", "couchdb.sofa-test.invalid")
	r = cliRun(t, bin, "verify", via.String()+"/src", via.String()+"/dst")
	r.wantCode(t, 1) // not through the proxy: the name does not resolve
	var secrets []string
	if p, ok := su.User.Password(); ok {
		secrets = append(secrets, p)
	}
	oneLine(t, r, "source: ", secrets...)
}
