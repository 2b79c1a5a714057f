#include "sqlite3_corpus.h"
int add(int a, int b) { return a + b; }
