package eval

import "slices"

// RecallAt is the share of gold found in the first k of ranked (0 without
// gold).
func RecallAt(ranked, gold []string, k int) float64 {
	if len(gold) == 0 {
		return 0
	}
	top := ranked[:min(k, len(ranked))]
	found := 0
	for _, id := range gold {
		if slices.Contains(top, id) {
			found++
		}
	}
	return float64(found) / float64(len(gold))
}

// ReciprocalRank is 1/r for the rank r (from 1) of the first gold id in
// ranked, 0 when ranked holds none; its mean over cases is the MRR.
func ReciprocalRank(ranked, gold []string) float64 {
	for i, id := range ranked {
		if slices.Contains(gold, id) {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// mean averages values in 0..1; a share is the mean of 0s and 1s.
type mean struct {
	sum float64
	n   int
}

func (m *mean) add(v float64) { m.sum, m.n = m.sum+v, m.n+1 }

// addIf adds 1 when ok, else 0.
func (m *mean) addIf(ok bool) {
	if ok {
		m.add(1)
	} else {
		m.add(0)
	}
}

// value is the mean, 0 with no values.
func (m mean) value() float64 {
	if m.n == 0 {
		return 0
	}
	return m.sum / float64(m.n)
}

// ptr is the mean, nil with no values: a figure nothing measured is left
// out of the report rather than shown as 0.
func (m mean) ptr() *float64 {
	if m.n == 0 {
		return nil
	}
	v := m.value()
	return &v
}
