package app

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
	"github.com/sendonce/sendonce/internal/netpolicy"
)

// Limits on attachments (docs/api.md, "Attachments").
const (
	MaxAttachments = 20
	MaxFilenameLen = 255
	// DefaultMaxMessageBytes is --max-message-size: the whole message after
	// MIME encoding.
	DefaultMaxMessageBytes = 40 << 20
	// FetchTimeout bounds the download of one attachment by path;
	// FetchRedirects the redirects it follows (each one checked again
	// against the outbound policy, as every connection is).
	FetchTimeout   = 20 * time.Second
	FetchRedirects = 3
)

// AttachmentRequest is one file as a caller gives it: its content, decoded
// from standard base64 by the caller's route (Data; BadContent when it was
// not base64), or Path, a URL to fetch once at acceptance.
type AttachmentRequest struct {
	Filename    string
	Data        []byte
	HasContent  bool // content was given (Data may still be empty)
	BadContent  bool
	ContentType string
	ContentID   string
	Path        string
}

// prepareAttachments decodes and checks a request's files. Every error
// names the field: attachments[2].filename.
func (s *Service) prepareAttachments(ctx context.Context, reqs []AttachmentRequest, text, html string) ([]core.Attachment, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if len(reqs) > MaxAttachments {
		return nil, core.Errorf(core.CodeValidation, "attachments", "at most %d attachments", MaxAttachments)
	}
	// The message as it will be encoded: base64 grows by a third plus a
	// CRLF every 76 characters; the bodies by up to a fifth in
	// quoted-printable; headers and part headers stay far below 64 KiB.
	size := int64(len(text)+len(html))*6/5 + 64<<10
	out := make([]core.Attachment, 0, len(reqs))
	for i, r := range reqs {
		a, err := s.attachment(ctx, i, r)
		if err != nil {
			return nil, err
		}
		size += int64(base64.StdEncoding.EncodedLen(len(a.Data))) * 78 / 76
		if size > s.cfg.MaxMessageBytes {
			return nil, core.Errorf(core.CodeValidation, "attachments", "the message would be larger than %d bytes once encoded (--max-message-size)", s.cfg.MaxMessageBytes)
		}
		out = append(out, a)
	}
	return out, nil
}

func (s *Service) attachment(ctx context.Context, i int, r AttachmentRequest) (core.Attachment, error) {
	param := func(f string) string { return fmt.Sprintf("attachments[%d].%s", i, f) }
	a := core.Attachment{Filename: r.Filename, ContentID: r.ContentID}
	if err := CheckFilename(r.Filename); err != nil {
		return a, core.Errorf(core.CodeValidation, param("filename"), "%v", err)
	}
	if err := message.CheckContentID(r.ContentID); err != nil {
		return a, core.Errorf(core.CodeValidation, param("content_id"), "%v", err)
	}
	a.ContentType = r.ContentType
	if a.ContentType == "" {
		a.ContentType = TypeByFilename(r.Filename)
	}
	if mt, _, err := mime.ParseMediaType(a.ContentType); err != nil || !strings.Contains(mt, "/") ||
		strings.HasPrefix(mt, "multipart/") || message.HasLineBreak(a.ContentType) {
		return a, core.Errorf(core.CodeValidation, param("content_type"), "content_type %q is not a MIME type such as application/pdf", r.ContentType)
	}
	switch {
	case r.Path != "" && r.HasContent:
		return a, core.Errorf(core.CodeValidation, param("path"), "give content or path, not both")
	case r.Path != "":
		if !s.cfg.AttachmentFetch {
			return a, core.Errorf(core.CodeValidation, param("path"), "attachments by URL are off on this server (--attachment-fetch): send the content in base64")
		}
		data, err := s.fetch(ctx, r.Path)
		var busy *core.Error
		if errors.As(err, &busy) && busy.Code == core.CodeUnavailable {
			return a, busy // no room to fetch it now: not the caller's fault
		}
		if err != nil {
			return a, core.Errorf(core.CodeValidation, param("path"), "%v", err)
		}
		a.Data = data
	case r.BadContent:
		return a, core.Errorf(core.CodeValidation, param("content"), "content is not standard base64")
	default:
		a.Data = r.Data
	}
	return a, nil
}

// CheckFilename says why name cannot be an attachment's filename: it is
// required, at most MaxFilenameLen bytes of UTF-8, without control
// characters or a path separator.
func CheckFilename(name string) error {
	switch {
	case name == "":
		return errors.New("filename is required")
	case len(name) > MaxFilenameLen:
		return fmt.Errorf("filename is longer than %d bytes", MaxFilenameLen)
	case !utf8.ValidString(name):
		return errors.New("filename must be UTF-8")
	case strings.ContainsAny(name, `/\`):
		return errors.New("filename must not contain a path separator")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return errors.New("filename must not contain CR, LF, NUL or other control characters")
		}
	}
	return nil
}

// TypeByFilename is the MIME type an extension stands for, from Go's
// built-in table (the same on every machine, unlike /etc/mime.types), or
// application/octet-stream.
func TypeByFilename(name string) string {
	if t, ok := builtinTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

// builtinTypes are the types of common attachments. A fixed table, so the
// type a send was accepted with does not depend on the host's files.
var builtinTypes = map[string]string{
	".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".webp": "image/webp", ".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8",
	".csv": "text/csv; charset=utf-8", ".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8",
	".ics": "text/calendar; charset=utf-8", ".json": "application/json", ".xml": "application/xml",
	".zip": "application/zip", ".gz": "application/gzip", ".eml": "message/rfc822",
	".doc": "application/msword", ".xls": "application/vnd.ms-excel",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}

// fetch downloads an attachment once, at acceptance: http or https only,
// every connection (redirects too) through the outbound policy, within
// FetchTimeout and --max-message-size.
func (s *Service) fetch(ctx context.Context, raw string) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("path must be an http or https URL")
	}
	policy := s.cfg.Outbound
	if policy == nil {
		policy = netpolicy.MustParse("")
	}
	client := &http.Client{
		Transport: policy.HTTPTransport(),
		Timeout:   FetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > FetchRedirects {
				return fmt.Errorf("more than %d redirects", FetchRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return errors.New("a redirect left http and https")
			}
			return nil
		},
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errors.New("path must be an http or https URL")
	}
	release, err := s.fetchSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, netpolicy.ErrBlocked) {
			return nil, errors.New("path leads to an address this server may not connect to (loopback, private or otherwise not public)")
		}
		return nil, fmt.Errorf("could not fetch path: %s", netpolicy.Describe(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching path answered HTTP %d", resp.StatusCode)
	}
	body := &chargedReader{ctx: ctx, r: io.LimitReader(resp.Body, s.cfg.MaxMessageBytes+1), charge: memoryCharge(ctx)}
	data, err := io.ReadAll(body)
	var busy *core.Error
	if errors.As(err, &busy) {
		return nil, busy
	}
	if err != nil {
		return nil, fmt.Errorf("could not fetch path: %s", netpolicy.Describe(err))
	}
	if int64(len(data)) > s.cfg.MaxMessageBytes {
		return nil, fmt.Errorf("the file at path is larger than %d bytes (--max-message-size)", s.cfg.MaxMessageBytes)
	}
	return data, nil
}
