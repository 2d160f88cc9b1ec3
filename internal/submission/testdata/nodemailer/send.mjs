// Sends one message with Nodemailer, built anew on every run as an app's
// retry builds it (a new Date, new MIME boundaries).
//
// Usage: node send.mjs HOST PORT API_KEY KEY_KIND KEY
// KEY_KIND is "header" (an Idempotency-Key header) or "message-id" (the
// README's way: a fixed messageId). Prints one JSON object: the server's
// reply to DATA (response) or the error's responseCode and response.
import nodemailer from "nodemailer";

const [host, port, pass, kind, key] = process.argv.slice(2);
const transport = nodemailer.createTransport({
  host, port: Number(port), secure: false, ignoreTLS: true,
  auth: { user: "app", pass },
});
const mail = {
  from: "App <sender@example.com>",
  to: "Ann Example <ann@example.com>",
  subject: "Your receipt — order 1042 ✓",
  text: "Hello Ann,\nyour receipt is attached.\n",
  html: "<p>Hello Ann,</p><p>your receipt is attached.</p>",
  attachments: [{ filename: "receipt 1042.txt", content: "order 1042: 3 items\n".repeat(200) }],
};
if (kind === "header") {
  mail.headers = { "Idempotency-Key": key };
} else {
  mail.messageId = key;
}
try {
  const info = await transport.sendMail(mail);
  console.log(JSON.stringify({ ok: true, response: info.response }));
} catch (err) {
  console.log(JSON.stringify({ ok: false, responseCode: err.responseCode ?? 0, response: err.response ?? String(err) }));
}
