set -e
/opt/corpus-tools/bin/fmtcheck src/
echo checked
