//go:build !(linux || darwin || freebsd)

package s3

func allocBuf(n int) []byte { return make([]byte, n) }

func releaseBuf([]byte) {}
