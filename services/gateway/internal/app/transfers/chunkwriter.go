package transfers

import (
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/shipfile/shipfile/services/gateway/internal/app"
)

// chunkWriter is one PATCH's work on an upload it holds: it writes the chunk's bytes
// once (write), part by part, and saves the upload's state as they go out.
type chunkWriter struct {
	r     *Resumable
	u     TusUpload // the saved state
	owner uuid.UUID
	lease *lease
	sum   *checksum
	// released: the last save gave the lease back (no unlock needed).
	released bool
	// size is the body's announced length (-1: unknown): once that much is read, the
	// save of the last part can give the lease back (one round trip less a PATCH).
	size int64
	// unhold ends the hold on the object key of the file being completed (nil when
	// none is held): the key is reserved from before the object exists until its row
	// commits, as for multipart uploads, so an orphan object is found and removed.
	unhold func()

	// The chunk as it comes in (set up by begin):
	next    TusUpload         // the state as the chunk goes on; u is what is saved of it
	buf     []byte            // the part buffer
	n       int               // bytes in buf, not yet in a part
	digest  hash.Hash         // SHA-256 of the upload's first next.Offset bytes
	body    *io.LimitedReader // the body, cut one byte past the upload's length
	read    int64             // bytes of this body read so far
	bodyErr error             // why the body stopped: nil while it goes on (and once it ended)
	// saving is the save of the state after the last part sent, under way while the
	// next part is read and sent (saveBehind); nil when none is.
	saving *pendingSave
}

// pendingSave is a save of the state under way: its state, and its outcome once done
// is closed.
type pendingSave struct {
	next TusUpload
	done chan struct{}
	err  error
}

// write reads the body into the part buffer (after the stored tail), sends every full
// buffer as a part, and saves the state; see Write. A chunkWriter writes once.
func (w *chunkWriter) write(ctx context.Context, body io.Reader) (ChunkResult, error) {
	buf, release, err := w.r.chunks.Buffer()
	if err != nil {
		return ChunkResult{}, err
	}
	defer release()
	if err := w.begin(ctx, body, buf); err != nil {
		return ChunkResult{}, err
	}
	oldTail := w.u.TailKey
	err = w.receive(ctx)
	if saveErr := w.settle(); err == nil {
		err = saveErr
	}
	if err != nil {
		return ChunkResult{Upload: w.u}, err
	}
	if err := w.verify(); err != nil {
		return ChunkResult{Upload: w.u}, err
	}
	// Whatever reached the gateway is kept, even when the body broke off: the client's
	// HEAD then tells it where to go on. It outlives a cancelled request.
	sctx := context.WithoutCancel(ctx)
	if w.next.Offset == w.next.Length {
		if err := w.storeLast(sctx); err != nil {
			return ChunkResult{Upload: w.u}, err
		}
		return ChunkResult{Upload: w.u}, nil
	}
	if err := w.keep(sctx); err != nil {
		return ChunkResult{Upload: w.u}, err
	}
	if oldTail != "" && oldTail != w.u.TailKey {
		_ = w.r.chunks.Remove(sctx, oldTail)
	}
	return ChunkResult{Upload: w.u}, w.brokeOff()
}

// begin sets the chunk up on buf: the digest of the bytes saved so far, and the
// upload's stored tail read back into the buffer first.
func (w *chunkWriter) begin(ctx context.Context, body io.Reader, buf []byte) error {
	digest, err := restoreDigest(w.u.SHA256State)
	if err != nil {
		return err
	}
	w.next, w.buf, w.n, w.digest = w.u, buf, 0, digest
	if w.next.TailSize > 0 {
		n, err := w.r.chunks.ReadSmall(ctx, w.next.TailKey, buf)
		if err != nil {
			return fmt.Errorf("read tail of upload %s: %w", w.next.ID, err)
		}
		if int64(n) != w.next.TailSize {
			return fmt.Errorf("tail of upload %s has %d bytes, want %d", w.next.ID, n, w.next.TailSize)
		}
		w.n = n
	}
	w.body = &io.LimitedReader{R: body, N: w.left() + 1}
	return nil
}

// receive reads the body until it ends or breaks off, or the upload's length is
// reached. Every part that is not the upload's last goes out as soon as it is whole:
// streamed while it arrives when it starts on an empty buffer (streamWhole), else sent
// once the buffer is full. What is left is in buf[:n]; bodyErr says why the body
// stopped short of its end.
func (w *chunkWriter) receive(ctx context.Context) error {
	for w.bodyErr == nil {
		if w.n == 0 && w.left() > int64(len(w.buf)) && (w.size < 0 || w.size-w.read >= int64(len(w.buf))) {
			// A whole part that is not the upload's last: sent while it arrives, once its
			// first bytes did. A body that announces less than a part, or ends before its
			// first byte, starts nothing in the store.
			stored, err := w.streamWhole(ctx)
			if err != nil {
				return err
			}
			if !stored {
				// The body ended or broke off inside the part: buf[:n] is dealt with as a
				// read that ended short is.
				break
			}
			continue
		}
		full, err := w.fill()
		if err != nil {
			return err
		}
		if !full {
			break
		}
		// A full buffer that is not the upload's end goes out as a part.
		if err := w.putPart(ctx, w.buf[:w.n]); err != nil {
			return err
		}
		if err := w.sent(ctx); err != nil {
			return err
		}
	}
	if w.bodyErr == io.EOF {
		w.bodyErr = nil
	}
	return nil
}

// streamWhole sends the next part while it is read from the body, once its first
// bytes came, and says whether the part was stored: not when the body ended or broke
// off inside it (its bytes are then in buf[:n]).
func (w *chunkWriter) streamWhole(ctx context.Context) (stored bool, err error) {
	first, srcErr := 0, error(nil)
	for first == 0 && srcErr == nil {
		first, srcErr = w.body.Read(w.buf)
	}
	s := Streamed{N: first, BodyErr: srcErr}
	if srcErr == nil {
		s, err = w.streamPart(ctx, first)
	}
	w.took(w.buf[:s.N])
	if err != nil {
		return false, err
	}
	if s.BodyErr != nil {
		w.bodyErr = s.BodyErr
		if errors.Is(s.BodyErr, io.EOF) || errors.Is(s.BodyErr, io.ErrUnexpectedEOF) {
			w.bodyErr = io.EOF
		}
	}
	if s.Part.Size == 0 {
		return false, nil
	}
	w.next.Parts = append(append([]TusPart(nil), w.next.Parts...), s.Part)
	return true, w.sent(ctx)
}

// fill reads the body into the rest of the buffer, and says whether the buffer is
// full short of the upload's end (a part to send). More than the upload's length is
// refused.
func (w *chunkWriter) fill() (full bool, err error) {
	m, err := io.ReadFull(w.body, w.buf[w.n:])
	if int64(m) > w.left() {
		return false, &app.Error{Kind: app.KindTooLarge, Detail: "the chunk goes past Upload-Length"}
	}
	w.took(w.buf[w.n : w.n+m])
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if w.body.N > 0 { // the body ended, not the limit
			w.bodyErr = io.EOF
		}
	default:
		w.bodyErr = err
	}
	return w.n == len(w.buf) && w.next.Offset != w.next.Length, nil
}

// took counts b, the body's bytes just read into buf[n:], in the digests and the state.
func (w *chunkWriter) took(b []byte) {
	w.digest.Write(b)
	if w.sum != nil {
		w.sum.h.Write(b)
	}
	w.n += len(b)
	w.read += int64(len(b))
	w.next.Offset += int64(len(b))
}

// left is how many bytes the upload lacks after next.Offset.
func (w *chunkWriter) left() int64 { return w.next.Length - w.next.Offset }

// sent records that the buffer went out as a part (the stored tail with it). Without a
// checksum to match, the state is saved: the PATCH's last save at once (it answers once
// that is durable), any other while the next part is read and sent (saveBehind).
func (w *chunkWriter) sent(ctx context.Context) error {
	w.n = 0
	w.next.TailKey, w.next.TailSize = "", 0
	if w.sum != nil {
		return nil
	}
	if w.size >= 0 && w.read == w.size {
		return w.save(ctx, true)
	}
	return w.saveBehind(ctx)
}

// verify says whether what the body brought may be stored: not once the lease is lost,
// nor, with a checksum, when the chunk broke off or does not match it.
func (w *chunkWriter) verify() error {
	if err := w.lease.holds(); err != nil {
		// Another request may hold the upload now: nothing more is stored.
		return err
	}
	if w.sum == nil {
		return nil
	}
	if w.bodyErr == errHandedOver {
		return &app.Error{Kind: app.KindBadRequest, Detail: "another request for this upload took it over; the chunk is discarded"}
	}
	if w.bodyErr != nil {
		return &app.Error{Kind: app.KindBadRequest, Detail: "the upload broke off; the chunk is discarded: " + w.bodyErr.Error()}
	}
	if !w.sum.matches() {
		return &app.Error{Kind: app.KindChecksumMismatch, Detail: "Upload-Checksum does not match the chunk; the chunk is discarded"}
	}
	return nil
}

// storeLast stores the upload's last bytes (finish) while its object key is held, and
// keeps the digest of the whole file in the state.
func (w *chunkWriter) storeLast(ctx context.Context) error {
	unhold, err := w.r.p.HoldObjectKey(ctx, w.next.ObjectKey)
	if err != nil {
		return err
	}
	w.unhold = unhold
	if err := w.finish(ctx, w.buf[:w.n]); err != nil {
		return err
	}
	if w.next.SHA256State, err = w.digest.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		return err
	}
	w.u = w.next
	return nil
}

// keep stores what the chunk brought short of the upload's end and saves the state:
// the rest of the buffer as a part when it reaches MinPartSize, else as a tail object
// that the next PATCH reads back first.
func (w *chunkWriter) keep(ctx context.Context) error {
	if w.next.Offset == w.u.Offset {
		return nil
	}
	if w.n >= w.r.cfg.MinPartSize {
		if err := w.putPart(ctx, w.buf[:w.n]); err != nil {
			return err
		}
		w.next.TailKey, w.next.TailSize = "", 0
	} else if w.n > 0 {
		if err := w.lease.holds(); err != nil {
			return err
		}
		key := fmt.Sprintf("%s%d", tailPrefix(w.next), w.next.Offset)
		if err := w.r.chunks.PutSmall(ctx, key, w.buf[:w.n], "application/octet-stream"); err != nil {
			return err
		}
		w.next.TailKey, w.next.TailSize = key, int64(w.n)
	}
	return w.save(ctx, w.bodyErr == nil)
}

// brokeOff is the answer to a body that stopped short of its end; nil for one that
// ended.
func (w *chunkWriter) brokeOff() error {
	if w.bodyErr == errHandedOver {
		return errHandedOver
	}
	if w.bodyErr != nil {
		return &app.Error{Kind: app.KindBadRequest, Detail: "the upload broke off: " + w.bodyErr.Error()}
	}
	return nil
}

// streamPart sends the next part, whose first filled bytes are in buf, while reading
// the rest from the body into buf (ChunkStore's StreamPart), starting the multipart
// upload first if needed. The error is the store's (or the lease's).
func (w *chunkWriter) streamPart(ctx context.Context, filled int) (Streamed, error) {
	if err := w.startPart(ctx); err != nil {
		return Streamed{N: filled}, err
	}
	return w.r.chunks.StreamPart(ctx, w.next.ObjectKey, w.next.S3UploadID, len(w.next.Parts)+1, w.body, w.buf, filled)
}

// putPart sends data as the next part, starting the multipart upload first if needed.
func (w *chunkWriter) putPart(ctx context.Context, data []byte) error {
	if err := w.startPart(ctx); err != nil {
		return err
	}
	part, err := w.r.chunks.PutPart(ctx, w.next.ObjectKey, w.next.S3UploadID, len(w.next.Parts)+1, data)
	if err != nil {
		return err
	}
	w.next.Parts = append(append([]TusPart(nil), w.next.Parts...), part)
	return nil
}

// startPart checks the lease before a part is sent, and starts the multipart upload
// when this is its first part.
func (w *chunkWriter) startPart(ctx context.Context) error {
	// A PATCH that lost its lease writes no part: another may write the same numbers.
	if err := w.lease.holds(); err != nil {
		return err
	}
	if w.next.S3UploadID == "" {
		if err := w.settle(); err != nil {
			return err
		}
		id, err := w.r.chunks.StartMultipart(ctx, w.next.ObjectKey, w.next.ContentType)
		if err != nil {
			return err
		}
		w.next.S3UploadID = id
		// Saved at once, so a chunk discarded later cannot leave the multipart upload
		// unknown to the sweep.
		saved := w.u
		saved.S3UploadID = id
		if err := w.r.store.SaveUpload(ctx, saved, w.owner, w.r.cfg.Lease, false); err != nil {
			_ = w.r.chunks.AbortMultipart(context.WithoutCancel(ctx), w.next.ObjectKey, id)
			return err
		}
		w.u = saved
	}
	return nil
}

// finish stores the upload's last bytes: a multipart upload gets them as its last
// part and is completed; an upload that never filled a part is one PUT.
func (w *chunkWriter) finish(ctx context.Context, data []byte) error {
	r := w.r
	if err := w.lease.holds(); err != nil {
		return err
	}
	if len(w.next.Parts) == 0 {
		if w.next.S3UploadID != "" {
			_ = r.chunks.AbortMultipart(ctx, w.next.ObjectKey, w.next.S3UploadID)
			w.next.S3UploadID = ""
		}
		return r.chunks.PutSmall(ctx, w.next.ObjectKey, data, w.next.ContentType)
	}
	if len(data) > 0 {
		if err := w.putPart(ctx, data); err != nil {
			return err
		}
	}
	if err := w.lease.holds(); err != nil {
		return err
	}
	if err := r.chunks.CompleteMultipart(ctx, w.next.ObjectKey, w.next.S3UploadID, w.next.Parts); err != nil {
		return err
	}
	w.next.TailKey, w.next.TailSize = "", 0
	return nil
}

// save stores the state of next, with the digest of its first Offset bytes and a new
// expiry, and renews the lease (gives it back when final), once the save under way, if
// any, is done.
func (w *chunkWriter) save(ctx context.Context, final bool) error {
	if err := w.settle(); err != nil {
		return err
	}
	next, err := w.toSave()
	if err != nil {
		return err
	}
	if err := w.r.store.SaveUpload(ctx, next, w.owner, w.r.cfg.Lease, final); err != nil {
		return err
	}
	w.u = next
	w.released = final
	return nil
}

// saveBehind starts the save of the state of next (never final) once the save under
// way, if any, is done, and returns without waiting for it: the database's commit
// overlaps the next part's bytes instead of holding them up. What a PATCH answers is
// saved before it answers (settle), so only a gateway that dies mid-PATCH loses more
// than its last part of what reached it, and nothing it acknowledged.
func (w *chunkWriter) saveBehind(ctx context.Context) error {
	if err := w.settle(); err != nil {
		return err
	}
	next, err := w.toSave()
	if err != nil {
		return err
	}
	// Not cancelled with the request: what reached the gateway is kept, as by keep.
	ctx = context.WithoutCancel(ctx)
	s := &pendingSave{next: next, done: make(chan struct{})}
	w.saving = s
	go func() {
		defer close(s.done)
		s.err = w.r.store.SaveUpload(ctx, next, w.owner, w.r.cfg.Lease, false)
	}()
	return nil
}

// settle waits for the save under way, if any, and records its outcome.
func (w *chunkWriter) settle() error {
	s := w.saving
	if s == nil {
		return nil
	}
	<-s.done
	w.saving = nil
	if s.err != nil {
		return s.err
	}
	w.u = s.next
	return nil
}

// toSave is the state of next as it is saved: with the digest of its first Offset
// bytes and a new expiry.
func (w *chunkWriter) toSave() (TusUpload, error) {
	state, err := w.digest.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return TusUpload{}, err
	}
	next := w.next
	next.SHA256State = state
	next.ExpiresAt = w.r.p.Now().UTC().Truncate(time.Microsecond).Add(w.r.cfg.ResumeWindow)
	return next, nil
}

// restoreDigest is the SHA-256 digest whose state was saved as state.
func restoreDigest(state []byte) (hash.Hash, error) {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("restore upload digest: %w", err)
	}
	return h, nil
}
