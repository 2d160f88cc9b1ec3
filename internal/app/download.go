package app

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// DownloadTTL is how long a received message's download URL works: long
// enough for a client to fetch what it was just given, short enough that
// a URL copied into a log is soon worth nothing.
const DownloadTTL = time.Hour

// downloadKey is the deployment's key for download URLs, shared by every
// process through the server secrets table.
type downloadKey struct {
	once sync.Once
	key  []byte
	err  error
}

func (s *Service) downloadSecret(ctx context.Context) ([]byte, error) {
	s.dlKey.once.Do(func() {
		s.dlKey.err = s.store.InTx(ctx, func(tx core.Tx) error {
			fresh := make([]byte, 32)
			_, _ = rand.Read(fresh)
			var err error
			s.dlKey.key, err = tx.ServerSecret(ctx, "received_download", fresh)
			return err
		})
	})
	return s.dlKey.key, s.dlKey.err
}

func downloadMAC(key []byte, tenant, id, part string, exp int64) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\x00%s\x00%s\x00%d", tenant, id, part, exp)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// DownloadToken signs a download of the tenant's received message id
// (part "" for the raw message, else an attachment id) until exp.
func (s *Service) DownloadToken(ctx context.Context, tenant, id, part string, exp time.Time) (string, error) {
	key, err := s.downloadSecret(ctx)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(exp.Unix(), 10) + "." + downloadMAC(key, tenant, id, part, exp.Unix()) + "." + tenant, nil
}

// CheckDownload returns the tenant a token signs for id and part, or
// core.ErrNotFound for a token that is wrong or expired.
func (s *Service) CheckDownload(ctx context.Context, token, id, part string) (string, error) {
	key, err := s.downloadSecret(ctx)
	if err != nil {
		return "", err
	}
	f := strings.SplitN(token, ".", 3)
	if len(f) != 3 {
		return "", core.ErrNotFound
	}
	expS, mac, tenant := f[0], f[1], f[2]
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil || s.Now().Unix() > exp {
		return "", core.ErrNotFound
	}
	if !hmac.Equal([]byte(mac), []byte(downloadMAC(key, tenant, id, part, exp))) {
		return "", core.ErrNotFound
	}
	return tenant, nil
}

// ReceivedRawFor reads a received message's bytes for a checked download.
func (s *Service) ReceivedRawFor(ctx context.Context, tenant, id string) ([]byte, error) {
	return s.store.ReceivedRaw(ctx, tenant, id)
}
