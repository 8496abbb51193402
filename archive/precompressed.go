package archive

import (
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// compressedTypes are media types whose bytes are compressed already
// (images, audio and video, archives, zip-based documents): compressing
// them again at the archive's best level costs CPU for nothing (on the
// real-data set every PNG came out no smaller), so such blobs are stored
// as is without trying.
var compressedTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/jpg": true, "image/pjpeg": true, "image/gif": true, "image/webp": true,
	"image/avif": true, "image/heic": true, "image/heif": true, "image/jp2": true, "image/jxl": true,
	"audio/mpeg": true, "audio/mp4": true, "audio/aac": true, "audio/ogg": true, "audio/opus": true, "audio/webm": true, "audio/flac": true,
	"application/zip": true, "application/gzip": true, "application/x-gzip": true, "application/x-bzip2": true,
	"application/x-xz": true, "application/zstd": true, "application/x-7z-compressed": true, "application/vnd.rar": true,
	"application/x-rar-compressed": true, "application/epub+zip": true, "application/java-archive": true,
	"font/woff": true, "font/woff2": true,
}

// compressedType reports whether contentType (an attachment's
// content_type, parameters allowed) names bytes compressed already:
// compressedTypes, any video, and the zip-based office formats.
func compressedType(contentType string) bool {
	t, _, _ := strings.Cut(contentType, ";")
	t = strings.ToLower(strings.TrimSpace(t))
	return compressedTypes[t] || strings.HasPrefix(t, "video/") ||
		strings.HasPrefix(t, "application/vnd.openxmlformats-officedocument.") ||
		strings.HasPrefix(t, "application/vnd.oasis.opendocument.")
}

// probeMin is the smallest blob probed (see compressible): below it,
// compressing at the blob level costs little anyway.
const probeMin = 16 << 10

var (
	probeEncoders = sync.Pool{New: func() any { return newZstdEncoder(zstd.SpeedFastest) }}
	probeBufs     = sync.Pool{New: func() any { return new([]byte) }}
)

// compressible reports whether data may be worth compressing: zstd at
// its fastest level makes a sample of it at least 1% smaller. The sample
// is probeWindows windows of probeWindow bytes spread evenly over data
// (all of it when shorter). Random or encrypted bytes, and compressed
// formats under a content type that does not say so, are then stored as
// is (a backup of seeds/001's atts_db, random attachments of up to 2 MB,
// took 1.63 CPU-s against 1.88 when each was compressed to find out).
func compressible(data []byte) bool {
	if len(data) < probeMin {
		return true
	}
	e := probeEncoders.Get().(*zstd.Encoder)
	buf := probeBufs.Get().(*[]byte)
	out := slices.Grow((*buf)[:0], e.MaxEncodedSize(probeWindow))
	in, n := 0, 0
	step := max((len(data)-probeWindow)/(probeWindows-1), probeWindow)
	for at := 0; at < len(data); at += step {
		w := data[at:min(len(data), at+probeWindow)]
		out = e.EncodeAll(w, out[:0])
		in += len(w)
		n += len(out)
	}
	probeEncoders.Put(e)
	*buf = out[:0]
	probeBufs.Put(buf)
	return n < in-in/100
}

const (
	probeWindow  = 64 << 10
	probeWindows = 4
)
