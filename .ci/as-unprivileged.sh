#!/usr/bin/env bash
# Run pytest on the given arguments as an unprivileged user, as most users run ctxkernel.
#   .ci/as-unprivileged.sh PYTHON PYTEST_ARGS...
# As root (CI), a user is created for the run and given search permission (o+x, no
# listing) on the folders that lead to the interpreter and the checkout; as anyone else,
# the tests simply run as that user.
set -euo pipefail
PY=$1
shift
if [ "$(id -u)" != 0 ]; then
  echo "ci: running as uid $(id -u)"
  exec "$PY" -m pytest -q -p no:cacheprovider "$@"
fi
NAME=${CTXKERNEL_CI_USER:-ckci}
id "$NAME" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$NAME"
for target in "$(readlink -f "$PY")" "$(cd "$(dirname "$PY")" && pwd)/x" "$PWD/x"; do
  d=$(dirname "$target")
  while [ "$d" != / ]; do
    if ! runuser -u "$NAME" -- test -x "$d"; then
      chmod o+x "$d"
      echo "ci: gave $NAME search permission on $d"
    fi
    d=$(dirname "$d")
  done
done
echo "ci: running as $NAME (uid $(id -u "$NAME"))"
exec runuser -u "$NAME" -- env HOME="$(getent passwd "$NAME" | cut -d: -f6)" PATH="$PATH" \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False TRITON_DEFAULT_FP_FUSION=1 \
  "$PY" -m pytest -q -p no:cacheprovider "$@"
