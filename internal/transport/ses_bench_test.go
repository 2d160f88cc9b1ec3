package transport

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/sendonce/sendonce/internal/testkit/seslocal"
)

// The closing figures of issue 29: sends per second through the ses
// transport to the emulator, against the emulator's own rate with the
// SDK alone (the difference is sendonce's part: tags, classification).
// Run on a quiet machine: go test -run '^$' -bench SES ./internal/transport/

func BenchmarkSES_Transport(b *testing.B) {
	emu := seslocal.Start(b)
	s := newTestSES(emu.URL)
	sub := Submission{SendID: "snd_bench", Tenant: "bench", Env: Envelope{To: []string{"ann@example.net"}},
		Raw: []byte("From: shop@example.com\r\nTo: ann@example.net\r\nSubject: bench\r\nMessage-ID: <b@example.com>\r\n\r\nHi.\r\n")}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Submit(context.Background(), sub); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkSES_SDKAlone(b *testing.B) {
	emu := seslocal.Start(b)
	c := sesv2.NewFromConfig(aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")},
		func(o *sesv2.Options) { o.BaseEndpoint = aws.String(emu.URL) })
	raw := []byte("From: shop@example.com\r\nTo: ann@example.net\r\nSubject: bench\r\nMessage-ID: <b@example.com>\r\n\r\nHi.\r\n")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := c.SendEmail(context.Background(), &sesv2.SendEmailInput{
				Content:     &sestypes.EmailContent{Raw: &sestypes.RawMessage{Data: raw}},
				Destination: &sestypes.Destination{ToAddresses: []string{"ann@example.net"}}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
