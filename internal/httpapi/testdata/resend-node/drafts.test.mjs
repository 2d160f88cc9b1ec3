// The official Resend Node SDK's inbox drafts calls against a running
// sendonce, with only RESEND_BASE_URL changed. TestResendNodeSDKDrafts
// (resend_node_drafts_test.go) creates an inbox holding one received
// message and passes:
//   RESEND_BASE_URL, RESEND_API_KEY   the server and an admin key
//   SENDONCE_INBOX                    the inbox's id
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';

const resend = new Resend(process.env.RESEND_API_KEY);
const inboxId = process.env.SENDONCE_INBOX;

function ok(res) {
  assert.equal(res.error, null, JSON.stringify(res.error));
  return res.data;
}

test('drafts: a reply drafted, edited, listed and sent once by two presses', async () => {
  const thread = ok(await resend.inboxes.threads.list({ inboxId })).data[0];
  const email = ok(await resend.inboxes.threads.emails.list({ inboxId, threadId: thread.id })).data[0];

  const created = ok(await resend.inboxes.drafts.create(
    { inboxId, threadId: thread.id, replyToEmailId: email.id, text: 'First try' },
    { idempotencyKey: 'draft-1' }));
  assert.equal(created.object, 'inbox_draft');
  // The same create again is a replay: the same draft, not a second one.
  const again = ok(await resend.inboxes.drafts.create(
    { inboxId, threadId: thread.id, replyToEmailId: email.id, text: 'First try' },
    { idempotencyKey: 'draft-1' }));
  assert.equal(again.id, created.id);

  const updated = ok(await resend.inboxes.drafts.update({ inboxId, draftId: created.id, text: 'Order 1234 ships today.' }));
  assert.equal(updated.id, created.id);

  const got = ok(await resend.inboxes.drafts.get({ inboxId, draftId: created.id }));
  assert.equal(got.object, 'inbox_draft');
  assert.equal(got.type, 'reply');
  assert.equal(got.text, 'Order 1234 ships today.');
  assert.equal(got.subject, 'Re: Where is my order?');
  assert.equal(got.to.length, 1);
  assert.match(got.to[0], /grace@customer.test/);
  assert.equal(got.thread_id, thread.id);
  assert.equal(got.reply_to_email_id, email.id);
  assert.equal(got.email_id, null);

  const list = ok(await resend.inboxes.drafts.list({ inboxId, limit: 10 }));
  assert.equal(list.object, 'list');
  assert.equal(list.has_more, false);
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, created.id);
  assert.equal(list.data[0].snippet, 'Order 1234 ships today.');

  // Two presses at once, one with headers: one send, one id.
  const [a, b] = await Promise.all([
    resend.inboxes.drafts.send({ inboxId, draftId: created.id, headers: { 'X-Ticket': '1234' } }),
    resend.inboxes.drafts.send({ inboxId, draftId: created.id }),
  ]);
  assert.match(ok(a).id, /^snd_/);
  assert.equal(ok(b).id, ok(a).id);
  assert.equal(ok(await resend.inboxes.drafts.get({ inboxId, draftId: created.id })).email_id, ok(a).id);

  // Sent: no more edits.
  const late = await resend.inboxes.drafts.update({ inboxId, draftId: created.id, text: 'Too late' });
  assert.equal(late.error.statusCode, 409);
});

test('drafts: a new message drafted and removed', async () => {
  const d = ok(await resend.inboxes.drafts.create(
    { inboxId, to: 'ops@customer.test', subject: 'Heads up', text: 'Draft only' },
    { idempotencyKey: 'draft-2' }));
  assert.equal(ok(await resend.inboxes.drafts.get({ inboxId, draftId: d.id })).type, 'standalone');
  const removed = ok(await resend.inboxes.drafts.remove({ inboxId, draftId: d.id }));
  assert.deepEqual(removed, { object: 'inbox_draft', id: d.id, deleted: true });
  const gone = await resend.inboxes.drafts.get({ inboxId, draftId: d.id });
  assert.equal(gone.error.statusCode, 404);
});
