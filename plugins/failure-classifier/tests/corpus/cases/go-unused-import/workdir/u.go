package demo

import "strings"

func One() int { return 1 }
