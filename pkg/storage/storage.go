// Package storage connects to the S3-compatible object store (MinIO) through minio-go/v7.
package storage

import (
	"context"
	"fmt"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config is the object-store part of a service's configuration.
type Config struct {
	Endpoint  string `env:"SHIPFILE_S3_ENDPOINT" default:"127.0.0.1:9000" help:"S3 endpoint host:port"`
	AccessKey string `env:"SHIPFILE_S3_ACCESS_KEY" default:"minioadmin" help:"S3 access key"`
	SecretKey string `env:"SHIPFILE_S3_SECRET_KEY" default:"minioadmin" secret:"true" help:"S3 secret key"`
	Bucket    string `env:"SHIPFILE_S3_BUCKET" default:"shipfile" help:"bucket holding package files"`
	UseSSL    bool   `env:"SHIPFILE_S3_USE_SSL" default:"false" help:"use HTTPS to reach S3"`
	// ObjectLock: the bucket is created with object locking, and the objects of a
	// package under a legal hold get S3's legal hold (docs/CONFIGURATION.md).
	ObjectLock bool `env:"SHIPFILE_S3_OBJECT_LOCK" default:"false" help:"create the bucket with object lock and put S3 legal holds on the objects of held packages"`
}

// Store is a client bound to one bucket.
type Store struct {
	Client *minio.Client
	Bucket string
	// ObjectLock says the bucket is made with object locking (Config.ObjectLock).
	ObjectLock bool
}

// Open creates the client and makes sure the bucket exists.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	tr, err := transport(cfg.UseSSL)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.UseSSL,
		Transport: tr,
	})
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	s := &Store{Client: client, Bucket: cfg.Bucket, ObjectLock: cfg.ObjectLock}
	if err := s.EnsureBucket(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// EnsureBucket creates the bucket when it does not exist yet (with object locking when
// ObjectLock is set).
func (s *Store) EnsureBucket(ctx context.Context) error {
	ok, err := s.Client.BucketExists(ctx, s.Bucket)
	if err != nil {
		return fmt.Errorf("storage: bucket %q: %w", s.Bucket, err)
	}
	if ok {
		return nil
	}
	if err := s.Client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{ObjectLocking: s.ObjectLock}); err != nil {
		// Another instance may have created it in the meantime.
		if exists, err2 := s.Client.BucketExists(ctx, s.Bucket); err2 == nil && exists {
			return nil
		}
		return fmt.Errorf("storage: create bucket %q: %w", s.Bucket, err)
	}
	return nil
}

// Check reports whether the bucket is reachable.
func (s *Store) Check(ctx context.Context) error {
	if _, err := s.Client.BucketExists(ctx, s.Bucket); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}
