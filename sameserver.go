package sofa

import "fmt"

// sameUUIDWarning is the warning for a source and a target at different
// URLs that report one server uuid (`GET /`) and name the same databases
// (two server endpoints, or two database endpoints of one name): the
// nodes of a CouchDB cluster share its uuid, and a copy from one node to
// another copies each database onto itself: it writes nothing and
// reports success. Two separate servers set up from one configuration
// may share a uuid too, so this is a warning, not a refusal. "" when the
// uuids differ or are not given.
func sameUUIDWarning(src, dst *Endpoint) string {
	s, d := src.Couch(), dst.Couch()
	if s == nil || d == nil || s.Server.UUID == "" || s.Server.UUID != d.Server.UUID || s.DBName != d.DBName {
		return ""
	}
	what := "each database is copied onto itself"
	if s.DBName != "" {
		what = "the database is copied onto itself"
	}
	return fmt.Sprintf("SOURCE and TARGET report the same server uuid (%s): if they are nodes of one cluster, %s and nothing is written", s.Server.UUID, what)
}
