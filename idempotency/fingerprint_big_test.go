package idempotency

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// BenchmarkFingerprint_10MiBAttachment: the fingerprint of a send with a
// 10 MiB file (13.4 MiB of base64) — the bytes it allocates say how many
// copies of the body canonicalisation makes. Its yardstick is
// BenchmarkFingerprint_10MiBAttachment_Yardstick, SHA-256 of the same
// bytes: the least any fingerprint of them costs, so the ratio is what
// reading the JSON and canonicalising it add to hashing.
func BenchmarkFingerprint_10MiBAttachment(b *testing.B) {
	body := bigAttachmentBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprint_10MiBAttachment_Yardstick(b *testing.B) {
	body := bigAttachmentBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		sum := sha256.Sum256(body)
		_ = hex.EncodeToString(sum[:])
	}
}

// bigAttachmentBody is a send request with a 10 MiB file of random bytes.
func bigAttachmentBody(b *testing.B) []byte {
	b.Helper()
	data := make([]byte, 10<<20)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	return []byte(`{"to":"ann@example.com","subject":"big","text":"x","attachments":[{"filename":"big.bin","content":"` +
		base64.StdEncoding.EncodeToString(data) + `"}]}`)
}

// TestFingerprint_LargeBodiesHashTheCanonicalForm: the large-body path
// gives exactly SHA-256 of jcs.Transform, whatever the long strings'
// places: values in nested objects whose members jcs reorders, arrays,
// member names (never set aside), escaped or non-ASCII strings.
func TestFingerprint_LargeBodiesHashTheCanonicalForm(t *testing.T) {
	long := func(c string) string { return strings.Repeat(c, 70<<10) }
	for name, body := range map[string]string{
		"file":            `{"to":"a@b.c","attachments":[{"filename":"x","content":"` + long("QUJD") + `"}]}`,
		"reordered":       `{"z":"` + long("z") + `","a":{"y":"` + long("y") + `","b":[1,2.50,"` + long("w") + `"]},"m":"short"}`,
		"long name":       `{"` + long("k") + `":"v","b":"` + long("v") + `"}`,
		"escaped":         `{"a":"` + long("x") + `\u00e9\/\n","b":"` + long("y") + `"}`,
		"non-ASCII":       `{"a":"` + long("é✓") + `","b":"` + long("\\\"") + `"}`,
		"white space":     " {\n \"a\" : \"" + long("q") + "\" ,\t\"b\":\r\n[ \"" + long("r") + "\" ] } ",
		"top-level value": `"` + long("s") + `"`,
	} {
		canonical, err := jcs.Transform([]byte(body))
		if err != nil {
			t.Fatalf("%s: jcs: %v", name, err)
		}
		sum := sha256.Sum256(canonical)
		got, err := Fingerprint([]byte(body))
		if err != nil || got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: %s, %v; want SHA-256 of the canonical form %x", name, got, err, sum)
		}
	}
	// Still refused: a long string with a raw control character.
	if _, err := Fingerprint([]byte(`{"a":"` + long("x") + "\x01" + `"}`)); err == nil {
		t.Error("a raw control character in a long string was accepted")
	}
}
