package server

import (
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/transport"
)

// egressPools reads --egress-pool, --stream-pool and --egress-warmup into
// c, and refuses those that name a source or pool that does not exist: a
// typo would otherwise send bulk mail from the transactional addresses.
func egressPools(cfg Config, c *transport.MXConfig) error {
	for _, v := range cfg.EgressPools {
		p, err := transport.ParsePool(v)
		if err != nil {
			return fmt.Errorf("--egress-pool: %w", err)
		}
		c.Pools = append(c.Pools, p)
	}
	for _, v := range cfg.StreamPools {
		stream, pool, err := transport.ParseStreamPool(v)
		if err != nil {
			return fmt.Errorf("--stream-pool: %w", err)
		}
		if _, dup := c.StreamPools[stream]; dup {
			return fmt.Errorf("--stream-pool: %s given twice", stream)
		}
		if c.StreamPools == nil {
			c.StreamPools = map[string]string{}
		}
		c.StreamPools[stream] = pool
	}
	for _, v := range cfg.EgressWarmups {
		src, start, err := transport.ParseWarmup(v)
		if err != nil {
			return fmt.Errorf("--egress-warmup: %w", err)
		}
		if _, dup := c.Warmup[src]; dup {
			return fmt.Errorf("--egress-warmup: %s given twice", src)
		}
		if c.Warmup == nil {
			c.Warmup = map[string]time.Time{}
		}
		c.Warmup[src] = start
	}
	c.WarmupSchedule = cfg.WarmupSchedule
	return c.CheckEgress()
}
