package demo

import (
	"testing"
	"time"
)

func TestEven(t *testing.T) {
	if time.Now().Nanosecond()%2 != 0 {
		t.Fatal("odd nanosecond")
	}
}
