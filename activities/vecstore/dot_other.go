//go:build !amd64

package vecstore

const hasAVX2FMA = false

func dotAVX2(a, b []float32) float32 { return dotGo(a, b) }
