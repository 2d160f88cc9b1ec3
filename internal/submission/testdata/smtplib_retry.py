"""Submits one multipart message with Python's standard smtplib, built anew
on every run as an app's retry builds it: a new Date, Message-ID and MIME
boundaries, the same Idempotency-Key.

Usage: smtplib_retry.py HOST PORT API_KEY IDEMPOTENCY_KEY
Prints one JSON object: the DATA reply's code and text, or the refusal's.
"""
import email.policy
import email.utils
import json
import smtplib
import sys
from email.message import EmailMessage

host, port, key, idem = sys.argv[1:5]

m = EmailMessage()
m["From"] = "App <sender@example.com>"
m["To"] = "Ann Example <ann@example.com>"
m["Subject"] = "Your receipt — order 1042 ✓"
m["Date"] = email.utils.formatdate()
m["Message-ID"] = email.utils.make_msgid(domain="example.com")
m["Idempotency-Key"] = idem
m.set_content("Hello Ann,\nyour receipt is attached.\n")
m.add_alternative("<p>Hello Ann,</p><p>your receipt is attached.</p>\n", subtype="html")
m.add_attachment(b"order 1042: 3 items\n" * 200, maintype="text", subtype="plain", filename="receipt 1042.txt")

s = smtplib.SMTP(host, int(port), timeout=20)
s.login("app", key)
s.mail("sender@example.com", ["BODY=8BITMIME"])
s.rcpt("ann@example.com")
code, reply = s.data(m.as_bytes(policy=email.policy.SMTP))
s.quit()
print(json.dumps({"code": code, "reply": reply.decode()}))
