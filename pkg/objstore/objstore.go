// Package objstore is Sluice's seam to object storage: where the compactor
// writes segments and the fetch service reads them back.
//
// It opens a gocloud.dev/blob Bucket from a URL and adds nothing on top;
// callers use the Bucket's API (NewWriter, NewRangeReader, Attributes,
// List, Delete). Three schemes are supported:
//
//	s3://BUCKET?region=R[&endpoint=http://HOST:PORT&use_path_style=true]
//	file:///ABSOLUTE/DIR        (sluice dev; the directory is created)
//	mem://                      (tests)
//
// Every driver passes the same conformance suite (objstoretest): whole
// and ranged reads, prefix listing, deletes, NotFound classification, and
// that a write that is not closed cleanly leaves no object behind (the
// compactor relies on it: an object either exists whole or not at all).
package objstore

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob" // mem://
	_ "gocloud.dev/blob/s3blob"  // s3://
	"gocloud.dev/gcerrors"
)

// Open opens the bucket at rawURL (see the package doc). For file:// the
// directory is created if missing.
func Open(ctx context.Context, rawURL string) (*blob.Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("objstore: parse %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		dir := filepath.FromSlash(u.Path)
		if (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(dir) {
			return nil, fmt.Errorf("objstore: %q: a file:// URL needs an absolute path (file:///var/lib/sluice/objects)", rawURL)
		}
		return fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, Metadata: fileblob.MetadataDontWrite})
	case "s3", "mem":
		b, err := blob.OpenBucket(ctx, rawURL)
		if err != nil {
			return nil, fmt.Errorf("objstore: open %q: %w", rawURL, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("objstore: %q: unsupported scheme %q (want s3://, file:// or mem://)", rawURL, u.Scheme)
	}
}

// FileURL is the file:// URL of dir, which is made absolute.
func FileURL(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool {
	return err != nil && gcerrors.Code(err) == gcerrors.NotFound
}
