package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/shipfile/shipfile/pkg/groupcommit"
)

// Gate decisions: what an event of a package may do on an ordered subscription now.
const (
	// GateGo: it is the package's next event for the subscription; it is attempted.
	GateGo = "go"
	// GateLate: an event of the package after it is already done (it reached the
	// dispatchers late, or it is redelivered); it is attempted at once.
	GateLate = "late"
	// GateWait: an earlier event of the package is still being delivered or retried;
	// its delivery waits in the database until that one is done.
	GateWait = "wait"
	// GateSkip: the subscription does not take it and it was next; the package's next
	// waiting delivery, if any, is released.
	GateSkip = "skip"
)

// OrderStore keeps the order of ordered subscriptions' deliveries per package, for
// every dispatcher instance together.
type OrderStore interface {
	// Gate decides whether del (whose PackageID and PackageSeq are set) may be attempted
	// now on its ordered subscription; take false says the subscription does not take
	// the event (it is only passed over). A GateWait writes del's row, pending, for the
	// release to read. released is the delivery a GateSkip released, "" when none.
	Gate(ctx context.Context, del Delivery, take bool) (decision, released string, err error)
	// Finish records that the event seq of package pkg is done for subscription sub
	// (delivered, or failed for good) and returns the delivery that may go next, ""
	// when none waits yet. An event that is not the package's next changes nothing.
	Finish(ctx context.Context, sub int64, pkg string, seq uint64) (released string, err error)
	// StalledReleases returns the deliveries released more than after ago and not yet
	// attempted (the instance that released them stopped first), up to limit, and
	// marks them released now.
	StalledReleases(ctx context.Context, after time.Duration, limit int) ([]Release, error)
	// Heads returns the next event of each (subs[i], pkgs[i]) in the order, 0 where the
	// package has no place yet: a read, which decides most gates.
	Heads(ctx context.Context, subs []int64, pkgs []string) ([]uint64, error)
	// Unstick moves the packages whose next event has not come for after (it never
	// will: written while the dispatchers did not yet know the subscription was
	// ordered) past that event, up to limit, and returns the deliveries released.
	Unstick(ctx context.Context, after time.Duration, limit int) ([]Release, error)
	// ReleaseUnordered forgets the order of subscriptions no longer ordered (or gone),
	// up to limit rows, and returns the deliveries that waited in it.
	ReleaseUnordered(ctx context.Context, limit int) ([]Release, error)
	// ForgetDone removes up to limit places of packages with nothing left to do for
	// their subscription (every event numbered so far done, nothing waiting or pending)
	// that have not moved for after, and returns how many it removed. A later event of
	// such a package starts where the package was done.
	ForgetDone(ctx context.Context, after time.Duration, limit int) (int, error)
}

// Release is a delivery whose turn came: it is handed to its subscription's consumer.
type Release struct {
	SubscriptionID int64
	DeliveryID     string
}

// Releaser hands a released delivery to its subscription's consumer (a due job).
type Releaser interface {
	Release(ctx context.Context, r Release) error
}

// Order keeps ordered subscriptions' deliveries in their packages' order: a delivery
// waits (its row written, pending, no attempt) while an earlier event of its package is
// not done for its subscription, and the end of each delivery, success or failure for
// good, releases the next one. What waits and what is next lives in PostgreSQL, so the
// order holds across instances and restarts.
type Order struct {
	store    OrderStore
	releaser Releaser
	log      *slog.Logger
	opts     OrderOptions
	// heads reads the places of many deliveries' packages at once.
	heads *groupcommit.Committer[orderKey, uint64]
	// forgot is when this instance last removed the places of finished packages.
	forgot time.Time
}

// OrderOptions tune an Order.
type OrderOptions struct {
	// ForgetAfter: the place of a package with nothing left to do for its subscription
	// is removed once it has not moved for this long (0: never; OrderForgetAfter gives
	// the bound for a retry schedule).
	ForgetAfter time.Duration
	// Metrics, when not nil, counts the places removed.
	Metrics *Metrics
}

// OrderForgetAfter is how long the place of a package with nothing left to do stays in
// the order for a retry schedule: three times the schedule's total, and at least three
// days, so that every subscription is done with the package's events (delivered, or
// failed for good) long before.
func OrderForgetAfter(schedule []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range schedule {
		total += d
	}
	return max(3*24*time.Hour, 3*total)
}

// orderKey is a package's place in a subscription's order.
type orderKey struct {
	sub int64
	pkg string
}

// orderRunners is how many reads of places may run at once per instance.
const orderRunners = 4

// NewOrder returns an Order on store, handing released deliveries to releaser; Close
// stops it.
func NewOrder(store OrderStore, releaser Releaser, log *slog.Logger, opts OrderOptions) *Order {
	o := &Order{store: store, releaser: releaser, log: log, opts: opts}
	o.heads = groupcommit.New(groupcommit.Options{Runners: orderRunners, Max: 256, Timeout: recordTimeout}, func(ctx context.Context, keys []orderKey) ([]uint64, error) {
		subs, pkgs := make([]int64, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			subs[i], pkgs[i] = k.sub, k.pkg
		}
		return store.Heads(ctx, subs, pkgs)
	})
	return o
}

// Close stops the reads of places; call it once no delivery runs any more.
func (o *Order) Close() {
	if o != nil {
		o.heads.Close()
	}
}

// Applies reports whether del's delivery is kept in order: its subscription asks for
// it and its event has a package and a number.
func (o *Order) Applies(sub Subscription, del Delivery) bool {
	return o != nil && sub.Ordered() && del.PackageID != "" && del.PackageSeq > 0
}

// Gate decides whether del may be attempted now (GateGo, GateLate) or waits (GateWait).
// A package's first event never waits, and asks nothing of the database.
func (o *Order) Gate(ctx context.Context, del Delivery) (string, error) {
	if del.PackageSeq == 1 {
		return GateGo, nil
	}
	// Most events are their package's next: a read (shared with other deliveries)
	// decides, with no lock (only the end of this event moves its package past it).
	head, err := o.heads.Do(ctx, orderKey{del.SubscriptionID, del.PackageID})
	switch {
	case err != nil:
		return "", fmt.Errorf("order of delivery %s: %w", del.ID, err)
	case head > 0 && del.PackageSeq == head:
		return GateGo, nil
	case head > 0 && del.PackageSeq < head:
		return GateLate, nil
	}
	decision, _, err := o.store.Gate(ctx, del, true)
	if err != nil {
		return "", fmt.Errorf("order of delivery %s: %w", del.ID, err)
	}
	return decision, nil
}

// Skip passes over an event of package pkg (number seq) that ordered subscription sub
// does not take, so that the package's later events do not wait for it.
func (o *Order) Skip(ctx context.Context, sub int64, pkg string, seq uint64) error {
	_, released, err := o.store.Gate(ctx, Delivery{SubscriptionID: sub, PackageID: pkg, PackageSeq: seq}, false)
	if err != nil {
		return fmt.Errorf("pass over event %d of package %s for subscription %d: %w", seq, pkg, sub, err)
	}
	o.release(ctx, sub, released, "")
	return nil
}

// Finish records that del is done (delivered, or failed for good when failed) and
// releases the next delivery of its package.
func (o *Order) Finish(ctx context.Context, del Delivery, failed bool) error {
	released, err := o.store.Finish(ctx, del.SubscriptionID, del.PackageID, del.PackageSeq)
	if err != nil {
		return fmt.Errorf("end of delivery %s in its package's order: %w", del.ID, err)
	}
	o.Released(ctx, del, released, failed)
	return nil
}

// Released hands over the delivery released ("" for none) by the end of del, which
// failed for good when failed.
func (o *Order) Released(ctx context.Context, del Delivery, released string, failed bool) {
	why := ""
	if failed {
		why = "the previous event of its package failed for good"
	}
	o.release(ctx, del.SubscriptionID, released, why)
}

// release hands deliveryID ("" for none) to its subscription's consumer. A release
// that fails is found again by ReleaseStalled.
func (o *Order) release(ctx context.Context, sub int64, deliveryID, why string) {
	if deliveryID == "" {
		return
	}
	if why != "" {
		o.log.Warn("ordered delivery released: "+why, "delivery_id", deliveryID, "hook_id", sub)
	}
	if err := o.releaser.Release(ctx, Release{SubscriptionID: sub, DeliveryID: deliveryID}); err != nil {
		o.log.Warn("hand over a released ordered delivery; the health pass hands it over again",
			"delivery_id", deliveryID, "hook_id", sub, "err", err)
	}
}

// stalledAfter is how long a released delivery may go unattempted before it is handed
// over again, and stalledBatch how many one pass hands over at most.
const (
	stalledAfter = time.Minute
	stalledBatch = 1000
)

// ReleaseStalled hands over again the released deliveries not attempted for a while,
// releases the next waiting delivery of the packages whose next event has not come for
// that long, and every waiting delivery of the subscriptions no longer ordered; every
// forgetEvery it also removes the places of finished packages (ForgetDone).
func (o *Order) ReleaseStalled(ctx context.Context) error {
	if o == nil {
		return nil
	}
	rs, err := o.store.StalledReleases(ctx, stalledAfter, stalledBatch)
	if err != nil {
		return err
	}
	gaps, err := o.store.Unstick(ctx, stalledAfter, stalledBatch)
	if err != nil {
		return err
	}
	if len(gaps) > 0 {
		o.log.Warn("ordered packages whose next event never came: their next waiting delivery goes", "deliveries", len(gaps))
	}
	unordered, err := o.store.ReleaseUnordered(ctx, stalledBatch)
	if err != nil {
		return err
	}
	rs = append(append(rs, gaps...), unordered...)
	for _, r := range rs {
		if err := o.releaser.Release(ctx, r); err != nil {
			return err
		}
	}
	if len(rs) > 0 {
		o.log.Info("released ordered deliveries handed over again", "deliveries", len(rs))
	}
	if o.opts.ForgetAfter > 0 && time.Since(o.forgot) >= forgetEvery {
		o.forgot = time.Now()
		n, err := o.ForgetDone(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			o.log.Warn("remove the order of finished packages", "err", err)
		case n > 0:
			o.log.Info("removed the order of finished packages", "places", n)
		}
	}
	return nil
}

// forgetEvery is how often an instance removes the places of finished packages, and
// forgetBatch and forgetMax how many one statement and one pass remove at most.
const (
	forgetEvery = 10 * time.Minute
	forgetBatch = 1000
	forgetMax   = 20 * forgetBatch
)

// ForgetDone removes the places in the order of the packages with nothing left to do
// for their subscription that have not moved for ForgetAfter, forgetBatch at a time and
// up to forgetMax in one call (a backlog goes over several), and returns how many it
// removed.
func (o *Order) ForgetDone(ctx context.Context) (int, error) {
	removed := 0
	for removed < forgetMax {
		n, err := o.store.ForgetDone(ctx, o.opts.ForgetAfter, min(forgetBatch, forgetMax-removed))
		removed += n
		if o.opts.Metrics != nil {
			o.opts.Metrics.OrderForgotten.Add(float64(n))
		}
		if err != nil {
			return removed, err
		}
		if n < forgetBatch {
			break
		}
	}
	return removed, nil
}
