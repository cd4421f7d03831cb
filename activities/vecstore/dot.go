package vecstore

// dot is the dot product of two vectors of one dimension: the cosine of
// two unit vectors. Search spends most of its time here; on amd64 with
// AVX2 and FMA it runs in assembly (dot_amd64.s), elsewhere in Go.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	if hasAVX2FMA {
		return dotAVX2(a, b)
	}
	return dotGo(a, b)
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
