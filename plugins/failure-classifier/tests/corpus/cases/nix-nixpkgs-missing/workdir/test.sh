#!/bin/sh
[ "$(expr 2 + 3)" = 5 ]
