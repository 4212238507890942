#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""deploy/k8s/ checked offline: every manifest against the Kubernetes API schemas (kubernetes-validate
from PyPI, strict: no unknown fields), the Multus NetworkAttachmentDefinition (a CRD it has no schema
for) by hand, and what the manifests must agree on: the ConfigMap holds configs/k8s.ini verbatim
(which app-config parses), the DaemonSet is Guaranteed QoS with whole CPUs for at least the lcores the
INI uses, probes on the KServe health endpoints, a termination grace above the drain's, the VF's
resource the NAD names; and the entry script's pieces run: its lcore mapping of a cpuset, its
reading of the data address from a network-status annotation.

Usage: k8s_check.py SOURCE_ROOT"""
import configparser
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml


def main():
    root = sys.argv[1]
    k8s = os.path.join(root, "deploy", "k8s")
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        print("SKIP: kubernetes-validate is not installed (pip install kubernetes-validate)")
        return 77
    failures = []

    def check(what, cond):
        print("  %-72s %s" % (what, "ok" if cond else "MISMATCH"))
        if not cond:
            failures.append(what)

    files = sorted(os.path.join(k8s, f) for f in os.listdir(k8s) if f.endswith(".yaml"))
    out = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", *files], capture_output=True, text=True)
    lines = (out.stdout + out.stderr).strip().splitlines()
    for line in lines:
        print("   ", line)
    passed = [l for l in lines if l.startswith("INFO") and " passed " in l]
    crd_only = [l for l in lines if l.startswith("WARN") and "NetworkAttachmentDefinition" in l]
    check("kubernetes-validate --strict: every manifest but the CRD passes (%d of %d)" % (len(passed), len(files)),
          out.returncode == 0 and len(passed) == len(files) - 1 and len(crd_only) == 1)
    docs = {}
    for f in files:
        for d in yaml.safe_load_all(open(f)):
            docs[d["kind"]] = d
    nad = docs["NetworkAttachmentDefinition"]
    cni = json.loads(nad["spec"]["config"])
    resource = nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"]
    check("NAD: an sriov CNI config with IPAM, for resource %s" % resource,
          cni.get("type") == "sriov" and "ipam" in cni and nad["apiVersion"] == "k8s.cni.cncf.io/v1")
    cm = docs["ConfigMap"]["data"]["batchwire.ini"]
    check("ConfigMap holds configs/k8s.ini verbatim", cm.rstrip("\n") == open(os.path.join(root, "configs", "k8s.ini")).read().rstrip("\n"))
    ds = docs["DaemonSet"]
    pod = ds["spec"]["template"]
    c = pod["spec"]["containers"][0]
    req, lim = c["resources"]["requests"], c["resources"]["limits"]
    check("DaemonSet: requests equal limits (Guaranteed QoS)", req == lim)
    cpus = int(str(req["cpu"]))
    check("DaemonSet: whole CPUs (%s), the static CPU manager's exclusive cores" % req["cpu"], str(req["cpu"]).isdigit())
    check("DaemonSet: hugepages, the VF (%s), IPC_LOCK" % resource,
          any(k.startswith("hugepages-") for k in req) and resource in req
          and "IPC_LOCK" in c["securityContext"]["capabilities"]["add"])
    check("DaemonSet: the pod joins the NAD's network",
          pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == nad["metadata"]["name"])
    ini = configparser.ConfigParser(inline_comment_prefixes=None, comment_prefixes=(";",))
    ini.read_string(cm)
    lcores = set()
    for spec in [ini["dataplane"]["poll_lcores"]] + [s["workers"] for n, s in ini.items() if n.startswith("model ") and "workers" in s]:
        for part in spec.split(","):
            lo, _, hi = part.partition("-")
            lcores.update(range(int(lo), int(hi or lo) + 1))
    check("DaemonSet: %d CPUs hold the INI's lcores 0..%d" % (cpus, max(lcores)), max(lcores) < cpus)
    check("DaemonSet: readiness on /v2/health/ready, liveness and startup on /v2/health/live",
          c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
          and c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
          and c["startupProbe"]["httpGet"]["path"] == "/v2/health/live")
    port = int(ini["dataplane"]["http"].rpartition(":")[2])
    check("DaemonSet and Service: the http port is the INI's %d" % port,
          c["ports"][0]["containerPort"] == port and docs["Service"]["spec"]["ports"][0]["port"] == port)
    probes = int(ini["dataplane"]["http_probes"].rpartition(":")[2])
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    check("DaemonSet: the probes on the INI's http_probes port %d (a listener of their own)" % probes,
          named.get("probes") == probes and all(c[k]["httpGet"]["port"] == "probes"
                                                 for k in ("readinessProbe", "livenessProbe", "startupProbe")))
    grace_ms = int(ini["dataplane"]["drain_grace_ms"])
    check("terminationGracePeriodSeconds %d covers drain_grace_ms %d and 10 s more" %
          (pod["spec"]["terminationGracePeriodSeconds"], grace_ms),
          pod["spec"]["terminationGracePeriodSeconds"] * 1000 >= grace_ms + 10000)
    probe = c["readinessProbe"]
    check("the grace outlasts the readiness probe's period x failure threshold",
          grace_ms >= 1000 * probe["periodSeconds"] * probe["failureThreshold"])

    script = c["args"][0]
    awk = re.search(r"awk -F, '(.*?)'\)", script, re.S).group(1)
    for cpuset, want in (("3,7,11,15", "0@3,1@7,2@11,3@15"), ("2-5", "0@2,1@3,2@4,3@5"), ("1,4-5,9", "0@1,1@4,2@5,3@9")):
        got = subprocess.run(["awk", "-F,", awk], input=cpuset + "\n", capture_output=True, text=True).stdout
        check("entry script: cpuset %s -> --lcores %s" % (cpuset, got), got == want)
    py = re.search(r"python3 -c '(.*?)'\)", script, re.S).group(1)
    with tempfile.TemporaryDirectory() as d:
        ann = os.path.join(d, "annotations")
        status = [{"name": "k8s-pod-network", "ips": ["192.168.1.7"], "default": True},
                  {"name": "batchwire/batchwire-data", "interface": "net1", "ips": ["10.20.0.12"]}]
        with open(ann, "w") as f:
            f.write('k8s.v1.cni.cncf.io/network-status=%s\n' % json.dumps(json.dumps(status, indent=1)))
            f.write('k8s.v1.cni.cncf.io/networks="batchwire-data"\n')
        got = subprocess.run([sys.executable, "-c", py.replace("/etc/podinfo/annotations", ann)], capture_output=True,
                             text=True)
        check("entry script: the data address from network-status (%s)" % (got.stdout.strip() or got.stderr.strip()[-80:]),
              got.stdout.strip() == "10.20.0.12")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
