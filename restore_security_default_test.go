package sofa

import "testing"

// openSecurity: a `_security` that gives access to nobody but server
// admins (CouchDB 3's admin_only default for a database a restore made
// and was interrupted in) is not named as lost when replaced.
func TestOpenSecurity(t *testing.T) {
	for sec, want := range map[string]bool{
		`{}`: true,
		`{"admins":{"names":[],"roles":[]},"members":{"names":[],"roles":[]}}`: true,
		`{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}`:       true,
		`{"members":{"roles":["_admin","ops"]}}`:                               false,
		`{"members":{"names":["ann"]}}`:                                        false,
		`{"admins":{"names":["bob"],"roles":["_admin"]}}`:                      false,
		`not json`: false,
	} {
		if got := openSecurity([]byte(sec)); got != want {
			t.Errorf("openSecurity(%s) = %v, want %v", sec, got, want)
		}
	}
}
