package app

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters (OWASP's recommended minimum: 19 MiB, 2 passes, 1 lane).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// DefaultHashWait is how long a password hash waits for a free slot before the
// request is answered 503.
const DefaultHashWait = 2 * time.Second

// Hasher hashes and verifies passwords with argon2id, at most a fixed number at once
// per gateway: each run takes 19 MiB and a CPU for tens of milliseconds, so an
// unbounded number of parallel sign-ins would fill the memory. A caller that gets no
// slot within the wait is answered KindBusy (503 with Retry-After). Every password
// of the gateway (sign-in, user create, password change, setup, link passwords) goes
// through one Hasher.
type Hasher struct {
	slots chan struct{}
	wait  time.Duration
	runs  atomic.Int64
}

// NewHasher returns a Hasher running at most concurrency argon2id computations at
// once (the CPU count when concurrency < 1); a caller waits at most wait for a slot
// (DefaultHashWait when wait <= 0).
func NewHasher(concurrency int, wait time.Duration) *Hasher {
	if concurrency < 1 {
		concurrency = runtime.NumCPU()
	}
	if wait <= 0 {
		wait = DefaultHashWait
	}
	return &Hasher{slots: make(chan struct{}, concurrency), wait: wait}
}

// Runs is the number of argon2id computations the Hasher has run (hashes and
// verifications), for tests and metrics.
func (h *Hasher) Runs() int64 { return h.runs.Load() }

// errHashBusy answers a password operation that found no free hashing slot in time.
func errHashBusy(wait time.Duration) error {
	return Busy(wait, "too many password checks at once; retry shortly")
}

func (h *Hasher) acquire(ctx context.Context) (func(), error) {
	select {
	case h.slots <- struct{}{}:
		return h.release, nil
	default:
	}
	t := time.NewTimer(h.wait)
	defer t.Stop()
	select {
	case h.slots <- struct{}{}:
		return h.release, nil
	case <-t.C:
		return nil, errHashBusy(h.wait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// release frees a slot once the run's memory is collected. argon2id allocates its 19 MiB
// afresh in every run and drops them when it returns; left to the garbage collector's
// pace, dead runs would pile up until the heap reaches its goal (twice the live heap), so
// a burst of sign-ins would take the gateway's memory up by as much as its live heap,
// depending on when a collection comes. Collecting before the slot is free keeps a burst
// at the slots' runs (19 MiB each) whatever the live heap, for a collection a run.
func (h *Hasher) release() {
	runtime.GC()
	<-h.slots
}

// Hash returns the argon2id hash of pw in the PHC string format. The caller applies
// its own length rules first (sign-in passwords: validatePassword; link passwords:
// ValidateLinkPassword).
func (h *Hasher) Hash(ctx context.Context, pw string) (string, error) {
	release, err := h.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	h.runs.Add(1)
	return hashArgon2id(pw)
}

// Verify reports whether pw matches the encoded hash. A malformed hash is no match.
// Its error is only KindBusy or the context's.
func (h *Hasher) Verify(ctx context.Context, encoded, pw string) (bool, error) {
	p, ok := parseArgon2id(encoded)
	if !ok || len(pw) > MaxPasswordLen {
		// Nothing to compare with: spend the time of a real check on the dummy hash,
		// so a malformed row or an overlong password is no faster than a wrong one.
		p = dummyParams
	}
	release, err := h.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	h.runs.Add(1)
	return matchArgon2id(p, pw) && ok && len(pw) <= MaxPasswordLen, nil
}

func matchArgon2id(p argonParams, pw string) bool {
	got := argon2.IDKey([]byte(pw), p.salt, p.t, p.m, p.p, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(got, p.key) == 1
}

// verifyPassword checks pw against an argon2id hash at once, outside any Hasher's
// bound (for the package service's default hasher, which has none).
func verifyPassword(encoded, pw string) bool {
	p, ok := parseArgon2id(encoded)
	return ok && matchArgon2id(p, pw)
}

func ValidatePassword(pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLen {
		return Invalid("password must be at least %d characters", MinPasswordLen)
	}
	if len(pw) > MaxPasswordLen {
		return Invalid("password must be at most %d bytes", MaxPasswordLen)
	}
	return nil
}

func hashArgon2id(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

type argonParams struct {
	m, t      uint32
	p         uint8
	salt, key []byte
}

// parseArgon2id reads a PHC argon2id string. Parameters beyond what this gateway
// writes (more memory or passes) are refused, so a crafted row cannot make one
// verification cost more than a normal one.
func parseArgon2id(encoded string) (argonParams, bool) {
	var a argonParams
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return a, false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &a.m, &a.t, &a.p); err != nil {
		return a, false
	}
	if a.m == 0 || a.m > argonMemory || a.t == 0 || a.t > 4*argonTime || a.p == 0 || a.p > 4 {
		return a, false
	}
	var err error
	if a.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil {
		return a, false
	}
	if a.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(a.key) == 0 || len(a.key) > 64 {
		return a, false
	}
	return a, true
}

// DummyHash is verified against when there is no real hash to check (an unknown,
// disabled or password-less account), so such a sign-in costs as much as a real one.
// (crypto/rand.Read does not fail since Go 1.24.)
var DummyHash, _ = hashArgon2id("not a real password")

var dummyParams, _ = parseArgon2id(DummyHash)

// The gateway's Hasher also hashes and checks link passwords (Packages.UseHasher).
var _ PasswordHasher = (*Hasher)(nil)

// PasswordHasher computes and checks argon2id hashes of passwords. The gateway may
// bound how many run at once (an error then, e.g. 503); the default runs them directly.
type PasswordHasher interface {
	Hash(ctx context.Context, password string) (string, error)
	// Verify fails only before it has compared anything (no slot in time, or ctx
	// done): Unlock then forgets the attempt, which was not a check.
	Verify(ctx context.Context, encoded, password string) (bool, error)
}

// DirectHasher hashes with the same argon2id parameters as sign-in passwords, with
// no bound: the gateway's main gives the package service its bounded Hasher
// (UseHasher), the one sign-in uses.
type DirectHasher struct{}

func (DirectHasher) Hash(_ context.Context, pw string) (string, error) { return hashArgon2id(pw) }

func (DirectHasher) Verify(_ context.Context, encoded, pw string) (bool, error) {
	return verifyPassword(encoded, pw), nil
}
