set -e
./scripts/lint.sh
echo checked
