// The official Resend Node SDK's receiving and Inboxes calls against a
// running sendonce, with only RESEND_BASE_URL changed.
// TestResendNodeSDKReceiving (resend_node_receiving_test.go) creates an
// inbox, delivers one message to it over SMTP and passes:
//   RESEND_BASE_URL, RESEND_API_KEY   the server and an admin key
//   SENDONCE_INBOX                    the inbox's id
//   SENDONCE_INBOX_ADDRESS            its address
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';

const resend = new Resend(process.env.RESEND_API_KEY);
const inboxId = process.env.SENDONCE_INBOX;
const address = process.env.SENDONCE_INBOX_ADDRESS;

function ok(res) {
  assert.equal(res.error, null, JSON.stringify(res.error));
  return res.data;
}

test('receiving: list, get with raw link, attachments, forward', async () => {
  const list = ok(await resend.emails.receiving.list());
  assert.equal(list.object, 'list');
  assert.equal(list.data.length, 1);
  const email = ok(await resend.emails.receiving.get(list.data[0].id));
  assert.equal(email.object, 'email');
  assert.equal(email.subject, 'Where is my order?');
  assert.deepEqual(email.received_for, [address]);
  assert.match(email.text, /order 1234/);
  assert.ok(email.raw.download_url.startsWith('http'));
  assert.equal(email.attachments.length, 1);
  assert.equal(email.attachments[0].filename, 'receipt.txt');

  const atts = ok(await resend.emails.receiving.attachments.list({ emailId: email.id }));
  assert.equal(atts.data.length, 1);
  const body = await (await fetch(atts.data[0].download_url)).text();
  assert.equal(body, 'paid in full\r\n'); // net/smtp sends line ends as CRLF

  const fwd = ok(await resend.emails.receiving.forward(
    { emailId: email.id, from: address, to: 'boss@node.test' },
    { idempotencyKey: 'fwd-1' }));
  assert.match(fwd.id, /^snd_/);
});

test('inboxes: list, get by id and address, update; threads and their emails; reply once per key', async () => {
  const inboxes = ok(await resend.inboxes.list());
  assert.equal(inboxes.data.length, 1);
  assert.equal(inboxes.data[0].id, inboxId);
  const inbox = ok(await resend.inboxes.get(address));
  assert.equal(inbox.id, inboxId);
  assert.equal(inbox.unread, 1);
  assert.equal(ok(await resend.inboxes.update(inboxId, { name: 'Help desk' })).id, inboxId);
  assert.equal(ok(await resend.inboxes.get(inboxId)).name, 'Help desk');

  const threads = ok(await resend.inboxes.threads.list({ inboxId }));
  assert.equal(threads.data.length, 1);
  const thread = threads.data[0];
  assert.equal(thread.read, false);
  assert.equal(thread.folder, 'inbox');
  const found = ok(await resend.inboxes.threads.search({ inboxId, query: 'order' }));
  assert.equal(found.data.length, 1);

  const emails = ok(await resend.inboxes.threads.emails.list({ inboxId, threadId: thread.id }));
  assert.equal(emails.data.length, 1);
  assert.equal(emails.data[0].direction, 'inbound');
  const one = ok(await resend.inboxes.threads.emails.get({ inboxId, threadId: thread.id, emailId: emails.data[0].id }));
  assert.equal(one.id, emails.data[0].id);

  const ids = [];
  for (let i = 0; i < 2; i++) {
    const r = ok(await resend.inboxes.threads.emails.reply(
      { inboxId, threadId: thread.id, emailId: one.id, text: 'It ships today.' },
      { idempotencyKey: 'reply-1' }));
    ids.push(r.id);
  }
  assert.equal(ids[0], ids[1]);

  const after = ok(await resend.inboxes.threads.emails.list({ inboxId, threadId: thread.id }));
  assert.equal(after.data.length, 2);
  assert.equal(after.data[1].direction, 'outbound');
  assert.equal(after.data[1].id, ids[0]);

  const read = ok(await resend.inboxes.threads.update({ inboxId, threadId: thread.id, read: true, folder: 'archive' }));
  assert.equal(read.read, true);
  assert.equal(read.folder, 'archive');
  assert.equal(ok(await resend.inboxes.get(inboxId)).unread, 0);
  process.stdout.write('REPLY_ID=' + ids[0] + '\n');
});
