#!/usr/bin/env bash
# session 28 call A (x2): verify HEAD a6ebba6 (owed from session 27) with session 27 call D's series, as it ran:
# integrity halves, warm workers and clock readings on GPU 0, one warm sweep on GPU 1
exec bash .ci/sessions/gpu27d-series.sh "$@"
