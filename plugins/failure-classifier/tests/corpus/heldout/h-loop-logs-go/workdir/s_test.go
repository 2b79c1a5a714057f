package demo

import "testing"

func TestSq(t *testing.T) { if Sq(3) != 9 { t.Errorf("Sq(3) = %d", Sq(3)) } }
