. ./calc.sh
[ "$(add 2 3)" = 5 ] || { echo "add 2 3: expected 5, got $(add 2 3)"; exit 1; }
