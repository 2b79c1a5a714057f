add() { expr "$1" - "$2"; }
