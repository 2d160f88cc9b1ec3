package dmarcreport

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Parse reads one report from data: XML, gzip or zip, told apart by
// their first bytes (reporters name and type their attachments every
// which way). Every error wraps ErrTooLarge, ErrTooManyRecords or
// ErrFormat.
func Parse(data []byte, lim Limits) (*Report, error) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxInput {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), lim.MaxInput)
	}
	r, err := open(data, lim)
	if err != nil {
		return nil, err
	}
	return decode(&runCap{r: &capped{r: r, left: lim.MaxXML}}, lim)
}

// open returns the XML bytes of data, decompressed as they are read.
func open(data []byte, lim Limits) (io.Reader, error) {
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrFormat, err)
		}
		// gzip(1) decodes the first member and warns of trailing
		// garbage; reporters' MTAs and gateways append some.
		zr.Multistream(false)
		return zr, nil
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		return openZip(data, lim)
	}
	return bytes.NewReader(data), nil
}

// openZip returns the first .xml entry. Its declared size is checked
// first (a cheap refusal of an honest large file); what is read is
// bounded by capped whatever the header claims.
func openZip(data []byte, lim Limits) (io.Reader, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%w: zip: %v", ErrFormat, err)
	}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() || !strings.HasSuffix(strings.ToLower(f.Name), ".xml") {
			continue
		}
		if f.UncompressedSize64 > uint64(lim.MaxXML) {
			return nil, fmt.Errorf("%w: the zip entry declares %d bytes, the limit is %d", ErrTooLarge, f.UncompressedSize64, lim.MaxXML)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%w: zip entry: %v", ErrFormat, err)
		}
		return rc, nil
	}
	return nil, fmt.Errorf("%w: the zip holds no .xml file", ErrFormat)
}

// capped reads at most left bytes and then fails with ErrTooLarge (not
// io.EOF, as io.LimitReader would: a truncated report must not read as
// a shorter, valid one).
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a report of exactly the limit from a
		// larger one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: the XML is larger than the limit", ErrTooLarge)
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// maxRun bounds the bytes between two of '<' and '>': a text or a tag.
// encoding/xml holds a whole token in memory, several times over while it
// decodes it into a field; report fields are names, addresses and
// numbers, and a 64 MiB org_name would cost hundreds of MiB.
const maxRun = 64 << 10

// runCap fails a read past maxRun bytes without '<' or '>'.
type runCap struct {
	r   io.Reader
	run int
}

func (c *runCap) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for rest := p[:n]; ; {
		i := bytes.IndexAny(rest, "<>")
		if i < 0 {
			c.run += len(rest)
			break
		}
		if c.run += i; c.run > maxRun {
			break
		}
		c.run, rest = 0, rest[i+1:]
	}
	if c.run > maxRun {
		return 0, fmt.Errorf("%w: a text or tag longer than %d bytes", ErrTooLarge, maxRun)
	}
	return n, err
}

// wrapRead gives a read error its class: the cap's, or a broken stream.
func wrapRead(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrTooManyRecords) || errors.Is(err, ErrFormat) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrFormat, err)
}
