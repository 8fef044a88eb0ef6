package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
)

// gzipMagic begins every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// recordFile is -record's file, owned by the deterministic run that writes
// it: gzip-compressed when its name ends in .gz.
type recordFile struct {
	f  *os.File
	gz *gzip.Writer // nil: not compressed, or finished
}

// createRecord creates path for -record.
func createRecord(path string) (*recordFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	r := &recordFile{f: f}
	if strings.HasSuffix(path, ".gz") {
		r.gz = gzip.NewWriter(f)
	}
	return r, nil
}

func (r *recordFile) Write(p []byte) (int, error) {
	if r.gz != nil {
		return r.gz.Write(p)
	}
	return r.f.Write(p)
}

// finish ends the gzip stream (a no-op when not compressed): what was
// written is then complete in the file.
func (r *recordFile) finish() error {
	if r.gz == nil {
		return nil
	}
	err := r.gz.Close()
	r.gz = nil
	return err
}

// Close finishes the stream and closes the file.
func (r *recordFile) Close() error {
	err := r.finish()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openTrace returns the trace in f, decompressed when it is gzip (told by
// its first bytes, whatever its name).
func openTrace(f io.Reader) (io.Reader, error) {
	br := bufio.NewReader(f)
	head, _ := br.Peek(len(gzipMagic))
	if !bytes.Equal(head, gzipMagic) {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return zr, nil
}
