#!/usr/bin/env bash
# Run pytest on the given arguments as an unprivileged user, as most users run ctxkernel.
#   .ci/as-unprivileged.sh PYTHON PYTEST_ARGS...
#   .ci/as-unprivileged.sh --prepare PYTHON     (only the user and the permissions: the
#                                               root pass's tests that switch uid need them)
# As root (CI), a user is created for the run and given search permission (o+x, no
# listing) on the folders that lead to the interpreter and the checkout; as anyone else,
# the tests simply run as that user.
set -euo pipefail
PREPARE_ONLY=0
if [ "${1:-}" = "--prepare" ]; then PREPARE_ONLY=1; shift; fi
PY=$1
shift
if [ "$(id -u)" != 0 ]; then
  [ "$PREPARE_ONLY" = 1 ] && exit 0
  echo "ci: running as uid $(id -u)"
  exec "$PY" -m pytest -q -p no:cacheprovider "$@"
fi
NAME=${CTXKERNEL_CI_USER:-ckci}
id "$NAME" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$NAME"
for target in "$(readlink -f "$PY")" "$(cd "$(dirname "$PY")" && pwd)/x" "$PWD/x"; do
  # from the root down: a folder is reachable once all above it are
  path=""
  IFS=/ read -ra parts <<<"$(dirname "$target")"
  for part in "${parts[@]}"; do
    [ -n "$part" ] || continue
    path="$path/$part"
    if ! runuser -u "$NAME" -- test -x "$path"; then
      chmod o+x "$path"
      echo "ci: gave $NAME search permission on $path"
    fi
  done
done
[ "$PREPARE_ONLY" = 1 ] && exit 0
echo "ci: running as $NAME (uid $(id -u "$NAME"))"
exec runuser -u "$NAME" -- env HOME="$(getent passwd "$NAME" | cut -d: -f6)" PATH="$PATH" \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False TRITON_DEFAULT_FP_FUSION=1 \
  "$PY" -m pytest -q -p no:cacheprovider "$@"
