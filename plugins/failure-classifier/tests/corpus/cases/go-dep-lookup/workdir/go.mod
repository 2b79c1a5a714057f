module example.com/demo

go 1.19

require github.com/google/uuid v1.6.0
