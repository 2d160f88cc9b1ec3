package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
)

func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "bench-" + hex.EncodeToString(b[:])
}

func sendBody(to string) string {
	return `{"to":"` + to + `","subject":"Load test","text":"Hello from sendonce-bench."}`
}

func post(ctx context.Context, hc *http.Client, url, apiKey, idemKey, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/send", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", idemKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: httpTimeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
	}}
}
