package main

import "github.com/pkg/errors"

func main() { _ = errors.New("x") }
