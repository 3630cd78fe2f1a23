// Package httpx holds HTTP server pieces that bound what one client can hold: a
// request body that must keep a minimum rate (MinRateBody) and a keyed limit of
// requests in flight (InFlight). They know nothing of any one service.
package httpx
