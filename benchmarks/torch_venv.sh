# Sourced by the benchmarks whose baselines need PyTorch (mlp.sh, ray.sh):
# a benchmark-only venv, $OUT/torch-venv, with torch (CPU use only); the
# project's .venv packages are visible to it through a .pth file. Sets TPY.
TVENV=$OUT/torch-venv
if ! "$TVENV/bin/python" -c 'import torch' 2>/dev/null; then
    echo "installing PyTorch into $TVENV (benchmark only) ..." >&2
    "$PY" -m venv "$TVENV"
    site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    tsite=$("$TVENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$site" > "$tsite/groupfit-dev.pth"
    "$TVENV/bin/python" -m pip install -q torch
fi
TPY=$TVENV/bin/python
