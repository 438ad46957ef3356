"""The same job as opstatus, the way a user would write it with the official
Python client: every INTERVAL seconds, server-side apply the kube9 status
ConfigMap (one PATCH on a kept-alive connection). Reads the service-account
directory given in OPSTATUS_SERVICE_ACCOUNT_DIR. Prints one line per write.
"""
import json
import os
import sys
import time
from datetime import datetime, timezone

from kubernetes import client
from kubernetes.config.incluster_config import InClusterConfigLoader

sa_dir = os.environ["OPSTATUS_SERVICE_ACCOUNT_DIR"]
interval = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
InClusterConfigLoader(token_filename=f"{sa_dir}/token", cert_filename=f"{sa_dir}/ca.crt").load_and_set()
namespace = open(f"{sa_dir}/namespace").read().strip()
api = client.CoreV1Api()

while True:
    status = {
        "mode": "operated", "tier": "free", "version": "1.0.0", "health": "healthy",
        "lastUpdate": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "registered": False, "error": None, "namespace": namespace,
    }
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube9-operator-status", "namespace": namespace},
            "data": {"status": json.dumps(status, separators=(",", ":"))}}
    api.patch_namespaced_config_map("kube9-operator-status", namespace, body, field_manager="python-writer",
                                    force=True, _content_type="application/apply-patch+yaml")
    print("wrote", flush=True)
    time.sleep(interval)
