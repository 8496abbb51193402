package replicate

import (
	"crypto/md5"
	"encoding/hex"
	"strings"
)

// ReplicationID derives the checkpoint id of a replication from the two
// endpoints' identities (server uuid or credential-free URL, plus db name)
// and the options that change what is copied (filters, winning revisions
// only...). No local state is involved, so a run resumes from any machine.
// The result is 32 hex digits; checkpoints live in `_local/<id>`.
func ReplicationID(source, target string, contentOptions ...string) string {
	var b strings.Builder
	b.WriteString("sofa-replication-v1\x00")
	b.WriteString(source)
	b.WriteByte(0)
	b.WriteString(target)
	for _, o := range contentOptions {
		b.WriteByte(0)
		b.WriteString(o)
	}
	sum := md5.Sum([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
