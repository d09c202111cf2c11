#!/usr/bin/env bash
# The old name of tools/asan.sh, which now covers every compiled module, not only the CRC
# engine, the scanner and the tally.
exec "$(dirname "${BASH_SOURCE[0]}")/asan.sh" "$@"
