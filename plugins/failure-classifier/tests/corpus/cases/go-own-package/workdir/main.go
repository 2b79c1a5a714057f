package main

import "example.com/demo/internal/store"

func main() { store.Open() }
