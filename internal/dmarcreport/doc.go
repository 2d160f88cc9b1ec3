// Package dmarcreport reads DMARC aggregate reports (RFC 7489 appendix C,
// and the DMARC 2.0 namespace): the XML itself, gzip'd (the first member;
// trailing bytes ignored, as gzip(1) does) or zipped (the first .xml
// entry). Reports come from strangers, so every read is bounded by
// Limits on the bytes actually read, not on what a header declares: a
// zip bomb or a gigabyte of XML is refused after at most MaxXML bytes.
package dmarcreport
