package main

import "github.com/google/uuid"

func main() { _ = uuid.New() }
