// The Redis-lock yardstick of bench/compare.sh: the idempotency design most
// often published for an email API, Express + node-redis v4:
//
//   1. GET idempotency:K          -> if set, answer the stored {status, body}
//   2. SET lock:K 1 NX EX 30      -> if not set, 409 (another request holds K)
//   3. send                       -> a stub that only counts (sent_total)
//   4. SET idempotency:K {status, body} EX 86400
//   5. DEL lock:K                 (always, even when the send failed)
//
// It is kept deliberately naive, because it is what sendonce is measured
// against, not a design to copy: nothing is durable (the script runs its
// Redis with no RDB and no AOF), the GET and the SET NX are separate steps
// and the lock expires on a timer, so concurrent or crash-interrupted
// retries send the same mail more than once.
//
// Environment: PORT (3000), REDIS_URL (redis://127.0.0.1:6390),
// SEND_DELAY_MS (0: the stub answers at once). Listens on 127.0.0.1 only.
'use strict';

const express = require('express');
const { createClient } = require('redis');

const port = Number.parseInt(process.env.PORT || '3000', 10);
const redisURL = process.env.REDIS_URL || 'redis://127.0.0.1:6390';
const sendDelayMs = Number.parseInt(process.env.SEND_DELAY_MS || '0', 10);

const redis = createClient({ url: redisURL });
redis.on('error', (err) => console.error('redis:', err.message));

let sequence = 0;

// The "provider": it counts the send first (a real provider would already
// have taken the mail), then waits SEND_DELAY_MS, then answers an id.
async function sendEmail(mail, key) {
  await redis.incr(`sent:${key}`);
  await redis.incr('sent_total');
  if (sendDelayMs > 0) {
    await new Promise((resolve) => setTimeout(resolve, sendDelayMs));
  }
  sequence += 1;
  return { id: `msg_${process.pid}_${sequence}`, status: 'sent', to: mail && mail.to };
}

const app = express();
app.use(express.json());

app.post('/v1/send', async (req, res) => {
  const key = req.get('Idempotency-Key');
  if (!key) {
    res.status(400).json({ error: 'Idempotency-Key header is required' });
    return;
  }

  const stored = await redis.get(`idempotency:${key}`);
  if (stored !== null) {
    const { status, body } = JSON.parse(stored);
    res.status(status).json(body);
    return;
  }

  const locked = await redis.set(`lock:${key}`, '1', { NX: true, EX: 30 });
  if (locked === null) {
    res.status(409).json({ error: 'a request with this Idempotency-Key is in progress' });
    return;
  }

  try {
    const body = await sendEmail(req.body, key);
    await redis.set(`idempotency:${key}`, JSON.stringify({ status: 200, body }), { EX: 86400 });
    res.status(200).json(body);
  } catch (err) {
    res.status(500).json({ error: 'send failed' });
  } finally {
    await redis.del(`lock:${key}`);
  }
});

redis.connect().then(() => {
  app.listen(port, '127.0.0.1', () => {
    console.log(`redislock yardstick pid=${process.pid} on http://127.0.0.1:${port} redis=${redisURL} SEND_DELAY_MS=${sendDelayMs}`);
  });
}).catch((err) => {
  console.error('cannot connect to redis:', err.message);
  process.exit(1);
});
