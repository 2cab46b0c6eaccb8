#!/usr/bin/env bash
# Prints the seccomp profile OmniForge's container needs for bubblewrap: the container runtime's
# default profile (containers-common's /usr/share/containers/seccomp.json, or the file given)
# with one change: sethostname and setdomainname are allowed without CAP_SYS_ADMIN, because
# bubblewrap names the UTS namespace it makes for each run (--hostname). The kernel still
# checks CAP_SYS_ADMIN in the namespace's owning user namespace, so a process of the container
# without capabilities cannot rename the container itself; only bubblewrap's own namespaces.
#
#   deploy/image/seccomp.sh [DEFAULT_PROFILE] > omniforge-seccomp.json
#   podman run --security-opt seccomp=omniforge-seccomp.json ...
set -euo pipefail
exec python3 - "${1:-/usr/share/containers/seccomp.json}" <<'PY'
import json, sys

profile = json.load(open(sys.argv[1]))
extra = {"sethostname", "setdomainname"}
# The unconditional allow rule (the one that holds unshare, mount, pivot_root).
unconditional = [
    rule for rule in profile["syscalls"]
    if rule.get("action") == "SCMP_ACT_ALLOW" and not rule.get("args")
    and not rule.get("includes") and not rule.get("excludes") and "unshare" in rule["names"]
]
if len(unconditional) != 1:
    sys.exit("seccomp.sh: the default profile has no single unconditional rule allowing unshare")
for rule in profile["syscalls"]:
    if rule is unconditional[0]:
        rule["names"] = sorted(set(rule["names"]) | extra)
    elif extra & set(rule["names"]):
        rule["names"] = [n for n in rule["names"] if n not in extra]
profile["syscalls"] = [rule for rule in profile["syscalls"] if rule["names"]]
json.dump(profile, sys.stdout, indent=1)
print()
PY
