#!/bin/sh
[ "$(cat $1)" = 5 ] || { echo "calc.txt: expected 5, got $(cat $1)" >&2; exit 1; }
cat $1
