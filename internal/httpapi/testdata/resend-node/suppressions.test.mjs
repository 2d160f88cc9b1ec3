// The official Resend Node SDK's suppressions.* calls against a running
// sendonce, with only RESEND_BASE_URL changed. TestResendNodeSDK_Suppressions
// (resend_node_suppressions_test.go) starts the server and passes:
//   RESEND_BASE_URL  the server
//   RESEND_API_KEY   a key with send, read and admin
//   SENDONCE_BOUNCED an address a bounce report put on the list, and
//   SENDONCE_SEND_ID the send whose report it was
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';

const resend = new Resend(process.env.RESEND_API_KEY);

function ok(res) {
  assert.equal(res.error, null, JSON.stringify(res.error));
  return res.data;
}

test('suppressions: add, get by id and email, list with cursor and origin, remove', async () => {
  const added = ok(await resend.suppressions.add({ email: 'Manual@Node.test' }));
  assert.equal(added.object, 'suppression');
  assert.match(added.id, /^sup_/);
  // Adding it again gives the same entry.
  assert.equal(ok(await resend.suppressions.add({ email: 'manual@node.test' })).id, added.id);

  const byID = ok(await resend.suppressions.get(added.id));
  assert.equal(byID.email, 'manual@node.test');
  assert.equal(byID.origin, 'manual');
  assert.equal(byID.source_id, null);
  assert.equal(ok(await resend.suppressions.get('manual@node.test')).id, added.id);

  const bounced = ok(await resend.suppressions.get(process.env.SENDONCE_BOUNCED));
  assert.equal(bounced.origin, 'bounce');
  assert.equal(bounced.source_id, process.env.SENDONCE_SEND_ID);

  const first = ok(await resend.suppressions.list({ limit: 1 }));
  assert.equal(first.object, 'list');
  assert.equal(first.data.length, 1);
  assert.equal(first.has_more, true);
  const second = ok(await resend.suppressions.list({ limit: 1, after: first.data[0].id }));
  assert.notEqual(second.data[0].id, first.data[0].id);
  const bounces = ok(await resend.suppressions.list({ origin: 'bounce' }));
  assert.deepEqual(bounces.data.map((s) => s.email), [process.env.SENDONCE_BOUNCED]);

  const removed = ok(await resend.suppressions.remove('manual@node.test'));
  assert.deepEqual(removed, { object: 'suppression', id: added.id, deleted: true });
  assert.equal((await resend.suppressions.get(added.id)).error.name, 'not_found');
  assert.equal((await resend.suppressions.remove(added.id)).error.statusCode, 404);
});

test('suppressions.batch: add and remove by emails and by ids', async () => {
  const added = ok(await resend.suppressions.batch.add({ emails: ['b1@node.test', 'b2@node.test', 'b3@node.test'] }));
  assert.equal(added.data.length, 3);
  assert.ok(added.data.every((s) => s.object === 'suppression' && s.id.startsWith('sup_')));

  const bad = await resend.suppressions.batch.add({ emails: ['b4@node.test', 'not an address'] });
  assert.equal(bad.error.statusCode, 422);
  assert.equal((await resend.suppressions.get('b4@node.test')).error.name, 'not_found'); // all or none

  const byEmail = ok(await resend.suppressions.batch.remove({ emails: ['b1@node.test', 'never@node.test'] }));
  assert.deepEqual(byEmail.data.map((d) => d.deleted), [true, false]);
  const byID = ok(await resend.suppressions.batch.remove({ ids: [added.data[1].id, added.data[2].id] }));
  assert.deepEqual(byID.data, [
    { object: 'suppression', id: added.data[1].id, deleted: true },
    { object: 'suppression', id: added.data[2].id, deleted: true },
  ]);
});

test('suppressions: a sending_access key cannot change the list', async () => {
  const sending = ok(await resend.apiKeys.create({ name: 'node-supp-send', permission: 'sending_access' }));
  const limited = new Resend(sending.token);
  const res = await limited.suppressions.add({ email: 'x@node.test' });
  assert.equal(res.error.statusCode, 403);
});
