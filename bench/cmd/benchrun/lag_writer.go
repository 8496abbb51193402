package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// writeRun is what a writer did: the ids written, when each write was
// acknowledged, the latency of each request (sorted) and the phase's span.
type writeRun struct {
	ids   []string
	acked map[string]time.Time
	lat   []time.Duration
	span  time.Duration
}

func (w writeRun) pct(p float64) time.Duration { return pct(w.lat, p) }
func (w writeRun) rate() float64 {
	if w.span <= 0 {
		return 0
	}
	return float64(len(w.ids)) / w.span.Seconds()
}

// steadyWrites PUTs rate documents per second for d into dbURL: a pacer
// releases write i at t0 + i/rate to the first free of writers clients.
func steadyWrites(ctx context.Context, dbURL, prefix string, rate int, d time.Duration, writers int) (writeRun, error) {
	n := int(float64(rate) * d.Seconds())
	w := writeRun{ids: make([]string, n), acked: make(map[string]time.Time, n), lat: make([]time.Duration, n)}
	acks := make([]time.Time, n)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range next {
				id := fmt.Sprintf("%s%06d", prefix, i)
				t0 := time.Now()
				ack, err := putDoc(ctx, dbURL, id)
				if err != nil {
					cancel(err)
					return
				}
				w.ids[i], acks[i], w.lat[i] = id, ack, ack.Sub(t0)
			}
		})
	}
	t0 := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if wait := time.Until(t0.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return w, err
	}
	w.span = time.Since(t0)
	for i, id := range w.ids {
		w.acked[id] = acks[i]
	}
	slices.Sort(w.lat)
	return w, nil
}

// burstWrite writes n documents in one _bulk_docs; every document is
// acknowledged when the answer arrives.
func burstWrite(ctx context.Context, dbURL, prefix string, n int) (writeRun, error) {
	w := writeRun{ids: make([]string, n), acked: make(map[string]time.Time, n)}
	var buf bytes.Buffer
	buf.WriteString(`{"docs":[`)
	t0 := time.Now()
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		w.ids[i] = fmt.Sprintf("%s%06d", prefix, i)
		fmt.Fprintf(&buf, `{"_id":%q,"t":%d,"pad":"0123456789012345678901234567890123456789012345678901234567890123"}`, w.ids[i], t0.UnixMicro())
	}
	buf.WriteString(`]}`)
	req, err := newRequest(ctx, http.MethodPost, dbURL+"/_bulk_docs", buf.Bytes())
	if err != nil {
		return w, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return w, err
	}
	var rows []struct {
		Error string `json:"error"`
	}
	derr := json.NewDecoder(resp.Body).Decode(&rows)
	resp.Body.Close()
	ack := time.Now()
	if resp.StatusCode != http.StatusCreated || derr != nil {
		return w, fmt.Errorf("_bulk_docs: HTTP %d %v", resp.StatusCode, derr)
	}
	for _, r := range rows {
		if r.Error != "" {
			return w, fmt.Errorf("_bulk_docs: %s", r.Error)
		}
	}
	for _, id := range w.ids {
		w.acked[id] = ack
	}
	w.lat = []time.Duration{ack.Sub(t0)}
	w.span = ack.Sub(t0)
	return w, nil
}

// putDoc PUTs a ~100 B document carrying its write time and returns when
// the server acknowledged it.
func putDoc(ctx context.Context, dbURL, id string) (time.Time, error) {
	body := fmt.Appendf(nil, `{"t":%d,"pad":"0123456789012345678901234567890123456789012345678901234567890123"}`, time.Now().UnixMicro())
	req, err := newRequest(ctx, http.MethodPut, dbURL+"/"+id, body)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("PUT %s: %w", id, err)
	}
	resp.Body.Close()
	ack := time.Now()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
		return ack, fmt.Errorf("PUT %s: HTTP %d", id, resp.StatusCode)
	}
	return ack, nil
}

func putDB(ctx context.Context, dbURL string) error {
	req, err := newRequest(ctx, http.MethodPut, dbURL, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusPreconditionFailed {
		return fmt.Errorf("PUT %s: HTTP %d", redact(dbURL), resp.StatusCode)
	}
	return nil
}
