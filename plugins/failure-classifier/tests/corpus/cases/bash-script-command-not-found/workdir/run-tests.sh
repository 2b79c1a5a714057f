#!/bin/bash
set -e
echo building
bazel test //...
