package grpcwire

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// parseTimeout reads a grpc-timeout value: at most 8 digits and a unit, H M S m u n (gRPC over
// HTTP/2, "Requests": Timeout). A value past time.Duration's range is its maximum.
func parseTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("grpcwire: malformed grpc-timeout %q", v)
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("grpcwire: malformed grpc-timeout %q: unit %q", v, v[len(v)-1])
	}
	digits := v[:len(v)-1]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("grpcwire: malformed grpc-timeout %q", v)
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("grpcwire: malformed grpc-timeout %q: %w", v, err)
	}
	if n > int64(math.MaxInt64/unit) {
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(n) * unit, nil
}
