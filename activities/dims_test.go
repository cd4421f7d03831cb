package activities_test

import (
	"errors"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

func TestDims(t *testing.T) {
	var d activities.Dims
	if _, ok := d.Get("m"); ok {
		t.Fatal("a dimension before any vector")
	}
	if err := d.Check("m", 0); !errors.Is(err, activities.ErrDimension) {
		t.Errorf("empty vector: %v", err)
	}
	if err := d.Check("m", 384); err != nil {
		t.Fatal(err)
	}
	if err := d.Check("m", 1024); !errors.Is(err, activities.ErrDimension) {
		t.Errorf("another dimension: %v", err)
	}
	if n, ok := d.Get("m"); !ok || n != 384 || d.Check("other", 1024) != nil {
		t.Errorf("Get = %d, %v", n, ok)
	}
}
