#!/bin/sh
# The unit test of a policy repository, for CI: every request under requests/ is evaluated
# offline (no AWS) against the set and the groups, validated against the schema, and its
# decision compared with the one its file name's prefix expects (allow-, auto-, forbid-, error-).
# Exit 0 when all agree. Needs `countersign` on PATH.
set -u
here=$(dirname "$0")
failed=0
for request in "$here"/requests/*.json; do
  name=$(basename "$request" .json)
  expected=${name%%-*}
  decision=$(countersign policy test "$here/acme.cedar" --schema "$here/acme.cedarschema" \
    --groups "$here/groups.json" --principal ci@acme.example --request "$request")
  code=$?
  case "$expected:$code" in
    allow:0 | auto:0 | forbid:3 | error:4) ;;
    *) failed=1 ;;
  esac
  case "$decision" in
    *"\"decision\":\"$expected\""*) echo "ok   $name" ;;
    *) failed=1; echo "FAIL $name (exit $code): $decision" ;;
  esac
done
exit $failed
