#!/usr/bin/env bash
# session 29 call D (x1): hostile-partial-skip under sync, run after run, at this tree and at 3d155b7 (before29.tar,
# the tree before the prepared draws), alternately: which checks catch it (call C's attack matrix under sync
# caught it on `distribution` alone)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
rm -rf /tmp/before && mkdir -p /tmp/before && tar xf scratch/before29.tar -C /tmp/before
for i in 1 2; do
  step "after-$i" python3 .ci/sessions/probe29_partial_skip.py 6 sync
  step "before-$i" bash -c "cd /tmp/before && PYTHONPATH=/tmp/before:\${PYTHONPATH:-} python3 $PWD/.ci/sessions/probe29_partial_skip.py 6 sync"
done
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/after-*.log "$LOGS"/before-*.log; do echo "== $(basename $f)"; grep -v "^===" "$f" | grep -v Warning | tail -40; done
