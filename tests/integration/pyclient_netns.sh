#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The Python client (client/python): pip installs it from the tree into a temporary directory
# (--no-deps: numpy is the host's), and pyclient_check.py uses it from the client
# namespace against batchwire serving echo, the MLP, ResNet-50 and the MLP again as 'mlps', which
# takes signed requests only.
#
# Usage (as root): tests/integration/pyclient_netns.sh BATCHWIRE BWRUN MODELS_DIR SOURCE_ROOT
set -u
BW_TAG=pycl
. "$(dirname "$0")/netns.sh"

BATCHWIRE=${1:?usage: $0 BATCHWIRE BWRUN MODELS_DIR SOURCE_ROOT}
BWRUN=${2:?usage: $0 BATCHWIRE BWRUN MODELS_DIR SOURCE_ROOT}
MODELS=${3:?usage: $0 BATCHWIRE BWRUN MODELS_DIR SOURCE_ROOT}
SRC=${4:?usage: $0 BATCHWIRE BWRUN MODELS_DIR SOURCE_ROOT}

bw_env_check
python3 -c 'import numpy, setuptools' 2>/dev/null || bw_skip "numpy and setuptools are needed (pip install numpy setuptools)"
for m in mlp resnet50; do
	[ -f "$MODELS/$m.onnx" ] || bw_skip "$MODELS/$m.onnx is missing (the models/ targets need python3 with onnx and numpy)"
done
WORK=$(mktemp -d /tmp/bw-pyclient.XXXXXX)
python3 -m pip install -q --no-deps --target "$WORK/site" "$SRC/client/python" >"$WORK/pip.log" 2>&1 ||
	bw_fail "pip could not install client/python: $(tail -n 3 "$WORK/pip.log")"
SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
BAD=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '3 %s\n' "$SECRET" >"$WORK/keys"
printf '3 %s\n' "$SECRET" >"$WORK/client.key"
printf '4 %s\n' "$BAD" >"$WORK/bad.key"
chmod 600 "$WORK/keys" "$WORK/client.key" "$WORK/bad.key"
bw_net_up
trap 'rc=$?; rm -rf "$WORK"; (exit $rc); bw_cleanup' EXIT

bw_daemon_start "$BATCHWIRE" --auth-keys "$WORK/keys" --model mlps="$MODELS/mlp.onnx" --model-opt mlps.auth=required \
	--model mlp="$MODELS/mlp.onnx" --model-opt mlp.max_batch_size=8 --model-opt mlp.allowed_batch_sizes=1,2,4,8 \
	--model resnet50="$MODELS/resnet50.onnx" --model-opt resnet50.max_batch_size=1
bw_cli python3 "$(dirname "$0")/pyclient_check.py" --site "$WORK/site" --host "$BW_SERVER_IP" --mtu "$BW_MTU" \
	--bwrun "$BWRUN" --models "$MODELS" --key-file "$WORK/client.key" --key-id 3 --bad-key-file "$WORK/bad.key" ||
	bw_fail "the Python client disagreed"
bw_daemon_stop
echo "PASS: the Python client, installed by pip from the tree, pings, describes, infers (in segments, signed)"
