#!/usr/bin/env bash
# meson test entry for the logits oracle: the Python with numpy and gguf
# comes from $SY_PYTHON (scripts/setup.sh makes .venv), else python3.
here=$(cd "$(dirname "$0")" && pwd)
exec "${SY_PYTHON:-python3}" "$here/oracle_suite.py" "$@"
