# Sourced by the benchmarks whose baselines need PyTorch (mlp.sh, ray.sh):
# a benchmark-only venv, $OUT/torch-venv, with torch (CPU use only); the
# project's .venv packages are visible to it through a .pth file, as a site
# directory, so their own .pth files (the editable groupfit) count too.
# Sets TPY.
TVENV=$OUT/torch-venv
if ! "$TVENV/bin/python" -c 'import torch' 2>/dev/null; then
    echo "installing PyTorch into $TVENV (benchmark only) ..." >&2
    "$PY" -m venv "$TVENV"
    "$TVENV/bin/python" -m pip install -q torch
fi
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tsite=$("$TVENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$site')" > "$tsite/groupfit-dev.pth"
TPY=$TVENV/bin/python
