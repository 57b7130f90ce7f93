package bench

import (
	"math"
	"slices"
	"time"
)

// Summary describes a sample of durations, in milliseconds.
type Summary struct {
	N      int     `json:"n"`
	MinMs  float64 `json:"min_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
}

// Summarize computes nearest-rank percentiles of ds; the zero Summary for an empty sample.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N:      len(s),
		MinMs:  ms(s[0]),
		P50Ms:  ms(Percentile(s, 50)),
		P90Ms:  ms(Percentile(s, 90)),
		P99Ms:  ms(Percentile(s, 99)),
		MaxMs:  ms(s[len(s)-1]),
		MeanMs: ms(sum / time.Duration(len(s))),
	}
}

// Percentile is the nearest-rank p-th percentile of sorted (ascending, non-empty).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
