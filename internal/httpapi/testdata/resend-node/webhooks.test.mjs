// The official Resend Node SDK's webhooks.* against a running sendonce,
// with only RESEND_BASE_URL changed, and resend.webhooks.verify on a real
// delivery. TestResendNodeSDKWebhooks (resend_node_test.go) starts the
// server with delivery workers, a mailbox hello@node.test, and passes:
//   RESEND_BASE_URL  the server
//   RESEND_API_KEY   a key with send, read and admin
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { Resend } from 'resend';

const resend = new Resend(process.env.RESEND_API_KEY);

function ok(res) {
  assert.equal(res.error, null, JSON.stringify(res.error));
  return res.data;
}

// endpoint starts a real HTTP endpoint on 127.0.0.1 that answers 200 and
// hands over each request it gets.
async function endpoint() {
  const queue = [];
  const waiting = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      res.writeHead(200).end('ok');
      const got = { headers: req.headers, body };
      const w = waiting.shift();
      if (w) w(got); else queue.push(got);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}/hooks`,
    next: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiting.push(r))),
    close: () => server.close(),
  };
}

async function eventually(fn, what) {
  for (let i = 0; i < 200; i++) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`not within 5s: ${what}`);
}

test('webhooks: create, deliver, verify, list, get, events, attempts, replay, update, rotate, remove', async () => {
  const ep = await endpoint();
  try {
    const created = ok(await resend.webhooks.create({ endpoint: ep.url, events: ['email.sent', 'email.failed'] }));
    assert.equal(created.object, 'webhook');
    assert.match(created.id, /^wh_/);
    assert.match(created.signing_secret, /^whsec_/);

    const sent = ok(await resend.emails.send({ from: 'hello@node.test', to: 'ada@example.com', subject: 'Hook me', text: 'x' }));
    const got = await ep.next();
    const headers = { id: got.headers['webhook-id'], timestamp: got.headers['webhook-timestamp'], signature: got.headers['webhook-signature'] };
    const event = resend.webhooks.verify({ payload: got.body, headers, webhookSecret: created.signing_secret });
    assert.equal(event.type, 'email.sent');
    assert.equal(event.data.email_id, sent.id);
    assert.deepEqual(event.data.to, ['ada@example.com']);
    assert.equal(event.data.subject, 'Hook me');
    assert.throws(() => resend.webhooks.verify({ payload: got.body + ' ', headers, webhookSecret: created.signing_secret }));

    const got1 = ok(await resend.webhooks.get(created.id));
    assert.equal(got1.endpoint, ep.url);
    assert.equal(got1.status, 'enabled');
    assert.deepEqual(got1.events, ['email.sent', 'email.failed']);
    assert.ok(ok(await resend.webhooks.list({ limit: 10 })).data.some((w) => w.id === created.id));

    const evs = await eventually(async () => {
      const l = ok(await resend.webhooks.events.list({ webhookId: created.id }));
      return l.data.length === 1 && l.data[0].status === 'success' ? l : null;
    }, 'the delivery listed as success');
    const eventId = evs.data[0].id;
    assert.equal(eventId, headers.id);
    assert.equal(evs.data[0].type, 'email.sent');
    const one = ok(await resend.webhooks.events.get({ webhookId: created.id, eventId }));
    assert.equal(one.object, 'webhook_event');
    assert.equal(one.next_attempt_at, null);
    assert.equal(one.payload.data.email_id, sent.id);
    const attempts = ok(await resend.webhooks.events.attempts.list({ webhookId: created.id, eventId }));
    assert.equal(attempts.data.length, 1);
    assert.equal(attempts.data[0].http_status_code, 200);

    // A replay delivers the same event again: same webhook-id, same body.
    assert.equal(ok(await resend.webhooks.events.replay({ webhookId: created.id, eventId })).id, eventId);
    const again = await ep.next();
    assert.equal(again.headers['webhook-id'], headers.id);
    assert.equal(again.body, got.body);

    // After a rotation only the new secret verifies.
    await eventually(async () => ok(await resend.webhooks.events.get({ webhookId: created.id, eventId })).status === 'success',
      'the replay recorded');
    const rotated = ok(await resend.webhooks.rotateSigningSecret(created.id));
    assert.notEqual(rotated.signing_secret, created.signing_secret);
    ok(await resend.webhooks.events.replay({ webhookId: created.id, eventId }));
    const third = await ep.next();
    const h3 = { id: third.headers['webhook-id'], timestamp: third.headers['webhook-timestamp'], signature: third.headers['webhook-signature'] };
    assert.equal(resend.webhooks.verify({ payload: third.body, headers: h3, webhookSecret: rotated.signing_secret }).type, 'email.sent');
    assert.throws(() => resend.webhooks.verify({ payload: third.body, headers: h3, webhookSecret: created.signing_secret }));

    assert.equal(ok(await resend.webhooks.update(created.id, { status: 'disabled', events: ['email.failed'] })).id, created.id);
    const disabled = ok(await resend.webhooks.get(created.id));
    assert.equal(disabled.status, 'disabled');
    assert.deepEqual(disabled.events, ['email.failed']);

    const refused = await resend.webhooks.create({ endpoint: 'ftp://example.com/x', events: ['email.sent'] });
    assert.equal(refused.error.statusCode, 422);
    assert.equal(refused.error.name, 'validation_error');

    const removed = ok(await resend.webhooks.remove(created.id));
    assert.equal(removed.deleted, true);
    assert.equal((await resend.webhooks.get(created.id)).error.name, 'not_found');
  } finally {
    ep.close();
  }
});
