// Command s3put uploads a file to s3://BUCKET/KEY through sofa's own
// uploader (storage/s3: a multipart upload of -transfers parts of
// -part-size bytes in flight, each with its Content-MD5, the object's
// size and ETag checked once completed), as `sofa backup` streams an
// archive there. The s3 benchmark (bench/cmd/benchrun, bench_s3.go) times
// it against `aws s3 cp` and rclone uploading the same file: sofa's
// upload alone, without the backup that feeds it.
//
//	s3put [-transfers N] [-part-size BYTES] FILE s3://BUCKET/KEY
//
// The endpoint, region and path-style addressing are read as sofa reads
// them (SOFA_S3_ENDPOINT or AWS_ENDPOINT_URL, AWS_REGION,
// SOFA_S3_PATH_STYLE=true), the credentials from the AWS SDK's chain. An
// existing object is replaced. On success it prints one JSON line:
// {"tool":"s3put","ok":true,"ms":...,"bytes":...}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
)

func main() {
	transfers := flag.Int("transfers", s3.DefaultTransfers, "parts in flight at once")
	partSize := flag.Int64("part-size", s3.DefaultPartSize, "bytes per part (at least 5 MiB)")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: s3put [-transfers N] [-part-size BYTES] FILE s3://BUCKET/KEY")
		os.Exit(2)
	}
	n, ms, err := put(context.Background(), flag.Arg(0), flag.Arg(1), *transfers, *partSize)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3put:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"tool": "s3put", "ok": true, "ms": ms, "bytes": n})
}

func put(ctx context.Context, file, dst string, transfers int, partSize int64) (int64, float64, error) {
	t0 := time.Now()
	endpoint := os.Getenv("SOFA_S3_ENDPOINT")
	st, err := s3.New(ctx, s3.Options{Endpoint: endpoint, Region: os.Getenv("SOFA_S3_REGION"),
		PathStyle: os.Getenv("SOFA_S3_PATH_STYLE") == "true", Transfers: transfers, PartSize: partSize})
	if err != nil {
		return 0, 0, err
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	w, err := st.Create(ctx, dst, storage.CreateOptions{Overwrite: true})
	if err != nil {
		return 0, 0, err
	}
	// the archive writer hands its sink tar blocks of members: pieces
	// of up to a few hundred KiB
	n, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{f}, make([]byte, 256<<10))
	if err != nil {
		w.Abort()
		return n, 0, err
	}
	if err := w.Commit(); err != nil {
		return n, 0, err
	}
	return n, float64(time.Since(t0).Microseconds()) / 1000, nil
}
