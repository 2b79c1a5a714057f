package demo

import "testing"

func TestPut(t *testing.T) { Put("a") }
