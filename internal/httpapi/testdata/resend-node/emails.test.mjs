// The official Resend Node SDK's email methods against sendonce (issue 17):
// attachments, scheduledAt, get, list, update, cancel and both batch
// validation modes. Run by TestResendNodeSDK with resend.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';

const resend = new Resend(process.env.RESEND_API_KEY);
const from = 'Hello <hello@node.test>';

function ok(res) {
  assert.equal(res.error, null, JSON.stringify(res.error));
  return res.data;
}

test('emails.send with attachments, then get', async () => {
  const pdf = Buffer.from('%PDF-1.4 sendonce');
  const sent = ok(await resend.emails.send({
    from, to: 'ann@example.com', subject: 'Invoice', html: '<p><img src="cid:logo"></p>', text: 'See attached.',
    attachments: [
      { filename: 'invoice.pdf', content: pdf },
      { filename: 'logo.png', content: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64'), contentType: 'image/png', contentId: 'logo' },
    ],
  }));
  assert.match(sent.id, /^snd_/);
  const got = ok(await resend.emails.get(sent.id));
  assert.equal(got.id, sent.id);
  assert.equal(got.subject, 'Invoice');
  const bad = await resend.emails.send({ from, to: 'ann@example.com', subject: 'x', text: 'x', attachments: [{ filename: 'a/b.txt', content: 'eA==' }] });
  assert.equal(bad.error.name, 'validation_error');
  assert.equal(bad.error.statusCode, 422);
});

test('emails.send with scheduledAt, update, cancel', async () => {
  const at = new Date(Date.now() + 3600e3).toISOString();
  const sent = ok(await resend.emails.send({ from, to: 'ann@example.com', subject: 'Later', text: 'later', scheduledAt: at }));
  let got = ok(await resend.emails.get(sent.id));
  assert.equal(got.last_event, 'scheduled');
  assert.equal(new Date(got.scheduled_at).getTime(), new Date(at).getTime());
  const later = new Date(Date.now() + 7200e3).toISOString();
  assert.equal(ok(await resend.emails.update({ id: sent.id, scheduledAt: later })).id, sent.id);
  got = ok(await resend.emails.get(sent.id));
  assert.equal(new Date(got.scheduled_at).getTime(), new Date(later).getTime());
  assert.equal(ok(await resend.emails.cancel(sent.id)).id, sent.id);
  assert.equal(ok(await resend.emails.get(sent.id)).last_event, 'canceled');
  const again = await resend.emails.cancel(sent.id);
  assert.equal(again.error.statusCode, 409);
  const past = await resend.emails.send({ from, to: 'ann@example.com', subject: 'x', text: 'x', scheduledAt: '2001-01-01T00:00:00Z' });
  assert.equal(past.error.statusCode, 422);
});

test('emails.list pages with after and before', async () => {
  const ids = [];
  for (let i = 0; i < 3; i++) {
    ids.push(ok(await resend.emails.send({ from, to: 'list@example.com', subject: `list ${i}`, text: 'x' })).id);
  }
  const first = ok(await resend.emails.list({ limit: 2 }));
  assert.equal(first.object, 'list');
  assert.equal(first.has_more, true);
  assert.deepEqual(first.data.map((e) => e.id), [ids[2], ids[1]]);
  assert.ok(first.data.every((e) => typeof e.last_event === 'string'));
  const next = ok(await resend.emails.list({ limit: 2, after: ids[1] }));
  assert.equal(next.data[0].id, ids[0]);
  const back = ok(await resend.emails.list({ limit: 2, before: ids[0] }));
  assert.deepEqual(back.data.map((e) => e.id), [ids[2], ids[1]]);
});

test('batch.send strict and permissive', async () => {
  const good = { from, to: 'batch@example.com', subject: 'b', text: 'b' };
  const bad = { from, to: 'not-an-address', subject: 'b', text: 'b' };
  const strict = await resend.batch.send([good, bad]);
  assert.equal(strict.error.name, 'validation_error');
  const both = ok(await resend.batch.send([good, good]));
  assert.equal(both.data.length, 2);
  const permissive = ok(await resend.batch.send([good, bad, good], { batchValidation: 'permissive' }));
  assert.equal(permissive.data.length, 2);
  assert.equal(permissive.errors.length, 1);
  assert.equal(permissive.errors[0].index, 1);
});
