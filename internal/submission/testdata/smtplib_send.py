"""Submits one message to sendonce with Python's standard smtplib.

Usage: smtplib_send.py HOST PORT API_KEY ATTACHMENT_FILE AUTH_MECH
Prints one JSON object: the DATA reply's code and text, and the message
bytes as sent (base64), which the Go test compares with what the relay
received.
"""
import base64
import email.policy
import email.utils
import json
import smtplib
import sys
from email.message import EmailMessage

host, port, key, attachment, mech = sys.argv[1:6]

m = EmailMessage(policy=email.policy.SMTP)
m["From"] = "App <sender@example.com>"
m["To"] = "ann@example.com"
m["Subject"] = "Grüße — ünïcødé ✓"
m["Date"] = email.utils.formatdate()
m["Message-ID"] = email.utils.make_msgid(domain="example.com")
m["Idempotency-Key"] = "py-" + m["Message-ID"].strip("<>").split("@")[0]
m.set_content("Hallo Ünïcødé — an 8-bit body ✓\n", cte="8bit")
with open(attachment, "rb") as f:
    m.add_attachment(f.read(), maintype="application", subtype="octet-stream", filename="blob.bin")
raw = m.as_bytes()

s = smtplib.SMTP(host, int(port), timeout=20)
s.ehlo()
if mech == "LOGIN":
    s.user, s.password = "app", key
    s.auth("LOGIN", s.auth_login, initial_response_ok=False)
else:
    s.login("app", key)
s.mail("sender@example.com", ["BODY=8BITMIME"])
s.rcpt("ann@example.com")
code, reply = s.data(raw)
s.quit()
print(json.dumps({"code": code, "reply": reply.decode(), "message": base64.b64encode(raw).decode()}))
