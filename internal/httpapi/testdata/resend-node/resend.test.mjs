// The official Resend Node SDK against a running sendonce, with only
// RESEND_BASE_URL changed. TestResendNodeSDK (resend_node_test.go) starts
// the server, a mailbox hello@node.test, and passes:
//   RESEND_BASE_URL  the server
//   RESEND_API_KEY   a key with send, read and admin
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';

const resend = new Resend(process.env.RESEND_API_KEY);

// ok unwraps the SDK's {data, error} answer.
function ok(res) {
  assert.equal(res.error, null, JSON.stringify(res.error));
  return res.data;
}

test('domains: create, list, get, update, verify, remove', async () => {
  const d = ok(await resend.domains.create({ name: 'node.test' }));
  assert.equal(d.id, 'node.test');
  assert.equal(d.status, 'not_started');
  assert.deepEqual(d.records.map((r) => r.record).sort(), ['DKIM', 'DMARC', 'SPF']);
  assert.ok(ok(await resend.domains.list()).data.some((x) => x.id === 'node.test'));
  assert.equal(ok(await resend.domains.get('node.test')).records.length, 3);
  assert.equal(ok(await resend.domains.update({ id: 'node.test', openTracking: false })).id, 'node.test');
  const refused = await resend.domains.update({ id: 'node.test', clickTracking: true });
  assert.equal(refused.error.name, 'validation_error');
  assert.equal(refused.error.statusCode, 422);
  assert.equal(ok(await resend.domains.verify('node.test')).object, 'domain');
  // Nothing is published in the test's DNS: the check fails.
  assert.equal(ok(await resend.domains.get('node.test')).status, 'failed');
  assert.equal(ok(await resend.domains.create({ name: 'gone.test' })).id, 'gone.test');
  assert.equal(ok(await resend.domains.remove('gone.test')).deleted, true);
  assert.equal((await resend.domains.get('gone.test')).error.name, 'not_found');
});

test('apiKeys: create, list, remove; sending_access cannot manage', async () => {
  const full = ok(await resend.apiKeys.create({ name: 'node-full' }));
  assert.match(full.token, /^so_/);
  const sending = ok(await resend.apiKeys.create({ name: 'node-send', permission: 'sending_access', domain_id: 'node.test' }));
  const list = ok(await resend.apiKeys.list());
  assert.ok(list.data.some((k) => k.id === sending.id && k.name === 'node-send'));
  assert.ok(!JSON.stringify(list).includes(sending.token));

  const sender = new Resend(sending.token);
  const sent = ok(await sender.emails.send({ from: 'hello@node.test', to: 'ada@example.com', subject: 'Hi', text: 'x' }));
  assert.match(sent.id, /^snd_/);
  for (const res of [await sender.domains.list(), await sender.apiKeys.list(), await sender.templates.list(),
    await sender.domains.create({ name: 'x.test' }), await sender.templates.create({ name: 'x', subject: 's', html: 'x' })]) {
    assert.equal(res.error.statusCode, 403);
    assert.equal(res.error.name, 'restricted_api_key');
  }

  assert.equal(ok(await resend.apiKeys.remove(full.id)).deleted, true);
  assert.equal((await new Resend(full.token).domains.list()).error.statusCode, 401);
});

test('templates: create, get, list, update, publish, duplicate, send, remove', async () => {
  const created = ok(await resend.templates.create({
    name: 'Node welcome', alias: 'node-welcome', from: 'Acme <sender@example.com>', subject: 'Hi {{{NAME}}}',
    html: '<p>Hello {{{NAME}}} on {{{PLAN}}}</p>',
    variables: [{ key: 'NAME', type: 'string' }, { key: 'PLAN', type: 'string', fallbackValue: 'free' }],
  }));
  assert.equal(created.object, 'template');
  const got = ok(await resend.templates.get('node-welcome'));
  assert.equal(got.id, created.id);
  assert.equal(got.html, '<p>Hello {{{NAME}}} on {{{PLAN}}}</p>');
  assert.equal(got.status, 'draft');
  assert.equal(got.variables.find((v) => v.key === 'PLAN').fallback_value, 'free');
  assert.ok(ok(await resend.templates.list()).data.some((t) => t.id === created.id));
  ok(await resend.templates.update(created.id, { subject: 'Welcome {{{NAME}}}' }));
  ok(await resend.templates.publish(created.id));
  const published = ok(await resend.templates.get(created.id));
  assert.equal(published.status, 'published');
  assert.equal(published.subject, 'Welcome {{{NAME}}}');
  const dup = ok(await resend.templates.duplicate(created.id));
  assert.notEqual(dup.id, created.id);
  assert.equal(ok(await resend.templates.get(dup.id)).name, 'Node welcome (copy)');
  // create(...).publish() chains the two calls.
  const chained = ok(await resend.templates.create({ name: 'Chained', subject: 's', html: '<p>x</p>' }).publish());
  assert.equal(ok(await resend.templates.get(chained.id)).status, 'published');

  const sent = ok(await resend.emails.send({ to: 'ada@example.com', template: { id: 'node-welcome', variables: { NAME: 'Ada' } } }));
  const email = ok(await resend.emails.get(sent.id));
  assert.equal(email.subject, 'Welcome Ada');
  assert.equal(email.html, '<p>Hello Ada on free</p>');

  assert.equal(ok(await resend.templates.remove(created.id)).deleted, true);
  assert.equal((await resend.templates.get(created.id)).error.name, 'not_found');
});
