package demo

// #include <zstd_corpus.h>
import "C"

func V() int { return int(C.ZSTD_versionNumber()) }
