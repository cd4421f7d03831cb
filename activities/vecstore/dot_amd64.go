package vecstore

import "golang.org/x/sys/cpu"

var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotAVX2 is dot in AVX2 with fused multiply-adds; len(b) >= len(a).
//
//go:noescape
func dotAVX2(a, b []float32) float32
