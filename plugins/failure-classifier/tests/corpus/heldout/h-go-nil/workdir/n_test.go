package demo

import "testing"

func TestLast(t *testing.T) { if Last(nil) != 0 { t.Fail() } }
