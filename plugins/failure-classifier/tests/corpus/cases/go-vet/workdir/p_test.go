package demo

import "testing"

func TestShow(t *testing.T) { _ = Show(1) }
