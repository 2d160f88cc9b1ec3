package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/inmail"
	"github.com/sendonce/sendonce/internal/mxserver"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/verp"
)

// bounceSigner returns the VERP signer of --bounce-domain, nil without
// one. Its key is the deployment's stored "verp" secret: the first process
// to need it makes it, every other one reads it (docs/security.md).
func bounceSigner(ctx context.Context, store *sqlstore.Store, domain string) (*verp.Signer, error) {
	if domain == "" {
		return nil, nil
	}
	domain = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(domain), "."))
	if !strings.Contains(domain, ".") || strings.ContainsAny(domain, "@ \r\n\t") {
		return nil, fmt.Errorf("--bounce-domain %q: want a domain name such as bounces.example.com", domain)
	}
	var key []byte
	err := store.InTx(ctx, func(tx core.Tx) error {
		fresh := make([]byte, 32)
		_, _ = rand.Read(fresh) // crypto/rand never fails (Go 1.24)
		var err error
		key, err = tx.ServerSecret(ctx, verp.SecretName, fresh)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bounce address key: %w", err)
	}
	return verp.New(key, domain), nil
}

// inboundConfig is the listener's settings from the server's.
func inboundConfig(cfg Config, resolver string) mxserver.Config {
	name := cmp.Or(cfg.InboundName, cfg.BounceDomain, "localhost")
	return mxserver.Config{Domain: name, UnsubscribeDomain: unsubscribeDomain(cfg), Checker: inmail.NewChecker(name, resolver), RejectDMARCFail: cfg.InboundRejectDMARC, TLS: cfg.InboundTLS,
		Limits: cfg.InboundLimits}
}

// unsubscribeDomain is the domain of the unsubscribe headers' mailto:
// address: --bounce-domain (its MX is the inbound listener), else
// --inbound-name; "" (no mailto: form) without a listener or a name.
func unsubscribeDomain(cfg Config) string {
	if cfg.InboundAddr == "" {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(cmp.Or(cfg.BounceDomain, cfg.InboundName)), "."))
}

// startInbound opens --inbound-addr and serves bounce mail on it.
func (s *Server) startInbound(logger *slog.Logger) error {
	if s.inboundAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.inboundAddr)
	if err != nil {
		return fmt.Errorf("--inbound-addr: %w", err)
	}
	c := s.inboundCfg
	c.Signer, c.Receiver, c.Logger, c.Now = s.Bounce, s.Service, logger, s.now
	c.Unsubscriber = s.Service
	in := mxserver.New(c)
	s.inbound, s.InboundAddr = in, ln.Addr().String()
	logger.Info("inbound listening", slog.String("addr", s.InboundAddr))
	go func() {
		if err := in.Serve(ln); err != nil {
			logger.Error("inbound listener stopped", slog.Any("error", err))
		}
	}()
	return nil
}

func (s *Server) stopInbound(ctx context.Context) error {
	if s.inbound == nil {
		return nil
	}
	in := s.inbound
	s.inbound = nil
	if err := in.Shutdown(ctx); err != nil {
		return in.Close()
	}
	return nil
}
