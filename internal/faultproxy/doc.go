// Package faultproxy is a real HTTP reverse proxy for tests that injects the
// faults a CouchDB client meets in production between itself and a real
// server (PouchDB Server in this project's tests).
//
// A Proxy listens on a loopback port and forwards every request to its
// target. Limits apply to all requests: a cap on concurrent in-flight
// requests and a request rate, both answered 429, and a request body size
// answered 413 {"error":"too_large"}. Rules pick requests by method, path
// regexp, position (After, Times) and probability (from a seeded source, so
// runs repeat) and then delay them, answer with a status, reset the
// connection before the answer or in the middle of its body, cut a _changes
// answer after N rows or bytes (no last_seq), or reject chosen document ids
// in _bulk_docs and single-document writes (those documents never reach the
// server). Limits and rules can be changed while the proxy runs; counters
// per rule and in total tell a test what happened.
//
// The proxy always asks the target for identity-encoded answers (no gzip),
// so that it can rewrite them; clients get uncompressed answers.
package faultproxy
