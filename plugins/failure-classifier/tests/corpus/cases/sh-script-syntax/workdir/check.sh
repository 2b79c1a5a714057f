#!/bin/bash
if [ "$(expr 2 + 3)" = 5 ]; then
  echo ok
fi fi
