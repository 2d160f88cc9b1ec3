package dovecottest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// maildir is the Maildir directory of user's folder ("INBOX" or a
// subfolder such as "Sent", Maildir++ layout).
func (d *Dovecot) maildir(user, folder string) string {
	root := filepath.Join(d.dir, "mail", user, "Maildir")
	if strings.EqualFold(folder, "INBOX") {
		return root
	}
	return filepath.Join(root, "."+strings.ReplaceAll(folder, "/", "."))
}

// Deliver writes raw into user's folder as a new message dated at, as a
// local delivery agent would: Dovecot sees it on its next look (within a
// second for a client in IDLE).
func (d *Dovecot) Deliver(t testing.TB, user, folder string, raw []byte, at time.Time) {
	t.Helper()
	dir := d.maildir(user, folder)
	for _, sub := range []string{"", "tmp", "new", "cur"} {
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, d.uid, d.gid); err != nil {
			t.Fatal(err)
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("%d.%s.dovecottest", time.Now().UnixNano(), hex.EncodeToString(rnd[:]))
	tmp := filepath.Join(dir, "tmp", name)
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, d.uid, d.gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, at, at); err != nil { // the INTERNALDATE
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "new", name)); err != nil {
		t.Fatal(err)
	}
}

// Dial logs in as user over IMAP (the test's own client, for seeding
// and checking); t.Cleanup logs out.
func (d *Dovecot) Dial(t testing.TB, user string) *imapclient.Client {
	t.Helper()
	d.mu.Lock()
	pass := d.users[user]
	d.mu.Unlock()
	var (
		c   *imapclient.Client
		err error
	)
	if d.CAPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(d.CAPEM)
		host, _, _ := net.SplitHostPort(d.Addr)
		c, err = imapclient.DialTLS(d.Addr, &imapclient.Options{TLSConfig: &tls.Config{RootCAs: pool, ServerName: host}})
	} else {
		c, err = imapclient.DialInsecure(d.Addr, nil)
	}
	if err != nil {
		t.Fatalf("dovecottest: dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Login(user, pass).Wait(); err != nil {
		t.Fatalf("dovecottest: login %s: %v", user, err)
	}
	return c
}

// Append stores raw in user's folder over IMAP, flagged seen or not.
func (d *Dovecot) Append(t testing.TB, user, folder string, raw []byte, seen bool) {
	t.Helper()
	c := d.Dial(t, user)
	defer c.Logout()
	opts := &imap.AppendOptions{}
	if seen {
		opts.Flags = []imap.Flag{imap.FlagSeen}
	}
	cmd := c.Append(folder, int64(len(raw)), opts)
	if _, err := cmd.Write(raw); err != nil {
		t.Fatalf("dovecottest: append: %v", err)
	}
	if err := cmd.Close(); err != nil {
		t.Fatalf("dovecottest: append: %v", err)
	}
	if _, err := cmd.Wait(); err != nil {
		t.Fatalf("dovecottest: append: %v", err)
	}
}

// MessageIDs returns the Message-ID header of every message in user's
// folder, in UID order, as written ("<…>").
func (d *Dovecot) MessageIDs(t testing.TB, user, folder string) []string {
	t.Helper()
	c := d.Dial(t, user)
	defer c.Logout()
	if _, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatalf("dovecottest: select %s: %v", folder, err)
	}
	found, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
	if err != nil {
		t.Fatalf("dovecottest: search %s: %v", folder, err)
	}
	uids := found.AllUIDs()
	if len(uids) == 0 {
		return nil
	}
	section := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Message-Id"}, Peek: true}
	msgs, err := c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		t.Fatalf("dovecottest: fetch %s: %v", folder, err)
	}
	var ids []string
	for _, m := range msgs {
		for _, b := range m.BodySection {
			for _, line := range strings.Split(string(b.Bytes), "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Message-Id") {
					ids = append(ids, strings.TrimSpace(v))
				}
			}
		}
	}
	return ids
}

// SetUIDValidity gives user's folder a new UIDVALIDITY, as recreating it
// would: a client must forget the UIDs it knew.
func (d *Dovecot) SetUIDValidity(t testing.TB, user, folder string, v uint32) {
	t.Helper()
	out, err := exec.Command("doveadm", "-c", d.conf, "mailbox", "update", "-u", user,
		"--uid-validity", strconv.FormatUint(uint64(v), 10), folder).CombinedOutput()
	if err != nil {
		t.Fatalf("dovecottest: doveadm mailbox update: %v: %s", err, out)
	}
}

// Kick disconnects user's IMAP sessions, as a server restart would.
func (d *Dovecot) Kick(t testing.TB, user string) {
	t.Helper()
	out, err := exec.Command("doveadm", "-c", d.conf, "kick", user).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "no users") {
		t.Logf("dovecottest: doveadm kick: %v: %s", err, out)
	}
}

// writeCerts makes a test CA and a certificate it signs for host, and
// returns Dovecot's ssl settings that serve it.
func (d *Dovecot) writeCerts(t testing.TB, host string) string {
	t.Helper()
	caKey, caDER := makeCert(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "dovecottest CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, leafDER := makeCert(t, ca, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: host}, IPAddresses: []net.IP{net.ParseIP(host)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	d.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(d.dir, "cert.pem"), filepath.Join(d.dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return "ssl = required\nssl_cert = <" + certPath + "\nssl_key = <" + keyPath
}

// makeCert makes a key and a certificate of tmpl signed by parent (self
// signed when parent is nil), valid from an hour ago for a day.
func makeCert(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}
