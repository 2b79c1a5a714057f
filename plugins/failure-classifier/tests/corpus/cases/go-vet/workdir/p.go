package demo

import "fmt"

func Show(n int) string { return fmt.Sprintf("%s items", n) }
