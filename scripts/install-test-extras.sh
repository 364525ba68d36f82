#!/usr/bin/env bash
# Best-effort install of the Python references some tests compare against: Debian's
# python3-torch, python3-pip and python3-matplotlib (the plot_metrics test draws with
# scripts/plot-metrics.py), and from PyPI into Debian's Python Hugging Face transformers
# (the export test loads our export with BertForPreTraining) and TensorBoard (the tensorboard
# test reads lansbert's event files with it). Failure is not an error: those tests then report
# themselves skipped with the reason.
set -uo pipefail
py=/usr/bin/python3
# sudo -n: a password prompt under `timeout` could not be answered; without sudo rights the
# installs fail and the tests skip.
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo -n"; fi
# apt_install PACKAGES...: after one `apt-get update` (install-deps.sh runs none when every
# build package is present, and an image may ship without package lists).
updated=0
apt_install() {
  if (( !updated )); then timeout 600 $SUDO apt-get update -qq || true; updated=1; fi
  timeout 900 $SUDO apt-get install -y -qq --no-install-recommends "$@"
}
install_tensorboard() {
  "$py" -c 'import tensorboard' 2>/dev/null && return
  timeout 600 $SUDO "$py" -m pip install -q --break-system-packages "tensorboard==2.21.0" "numpy<2" \
    || echo "install-test-extras: pip could not install tensorboard (the tensorboard test will skip)"
}
export DEBIAN_FRONTEND=noninteractive
if ! "$py" -c 'import matplotlib' 2>/dev/null; then
  apt_install python3-matplotlib \
    || echo "install-test-extras: apt-get could not install python3-matplotlib (plot_metrics will skip its drawing)"
fi
if "$py" -c 'import torch, transformers' 2>/dev/null; then
  echo "install-test-extras: torch and transformers present"
  install_tensorboard
  exit 0
fi
if ! "$py" -c 'import torch' 2>/dev/null || ! "$py" -m pip --version >/dev/null 2>&1; then
  apt_install python3-torch python3-pip python3-numpy \
    || echo "install-test-extras: apt-get could not install python3-torch/python3-pip (tests will skip)"
fi
# transformers 4.40 is the newest line that still supports Debian 12's torch 1.13. numpy<2: if
# pip has to fetch numpy (Debian's was not installed yet), a 2.x would shadow Debian's 1.x and
# break Debian's torch and matplotlib (the quickstart's plot) in this same Python.
timeout 600 $SUDO "$py" -m pip install -q --break-system-packages "transformers==4.40.2" "numpy<2" \
  || echo "install-test-extras: pip could not install transformers (the export test will skip)"
install_tensorboard
exit 0
